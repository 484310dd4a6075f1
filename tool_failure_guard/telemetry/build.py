"""Building the sink ``tool-failure-guard agent --telemetry`` names: none, console, otlp, file.

Re-exported by :mod:`~tool_failure_guard.telemetry.sink`.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from tool_failure_guard.telemetry.names import ProductAnalytics, package_version
from tool_failure_guard.telemetry.records import GuardTelemetry, NullTelemetry
from tool_failure_guard.telemetry.sink import OpenTelemetrySink

if TYPE_CHECKING:
    from opentelemetry.sdk.resources import Resource

#: Values of ``tool-failure-guard agent --telemetry`` (plus ``file:PATH``).
TELEMETRY_KINDS = ("none", "console", "otlp")
#: ``--telemetry file:PATH``: OTLP JSON lines, as the Collector's file exporter writes them.
FILE_KIND_PREFIX: Final = "file:"


def telemetry_resource(given: Mapping[str, str] | None = None) -> Resource:
    """The OpenTelemetry Resource: SDK defaults, our service name/version, then the env.

    ``OTEL_RESOURCE_ATTRIBUTES`` and ``OTEL_SERVICE_NAME`` win over the
    defaults, so operators set ``deployment.environment`` there; the
    runtime never invents a deployment environment.  ``given`` (what an
    operator wrote where no variable reaches: a hook's command line) wins over both.
    """
    from opentelemetry.sdk.resources import OTELResourceDetector, Resource

    defaults = {"service.name": "tool-failure-guard", "service.version": package_version()}
    resource = Resource.create(defaults).merge(OTELResourceDetector().detect())
    return resource.merge(Resource(dict(given))) if given else resource


_OTLP_PACKAGES: Final[Mapping[str, tuple[str, str, str]]] = {
    # protocol -> (distribution, metric exporter module, log exporter module)
    "http/protobuf": (
        "opentelemetry-exporter-otlp-proto-http",
        "opentelemetry.exporter.otlp.proto.http.metric_exporter",
        "opentelemetry.exporter.otlp.proto.http._log_exporter",
    ),
    "grpc": (
        "opentelemetry-exporter-otlp-proto-grpc",
        "opentelemetry.exporter.otlp.proto.grpc.metric_exporter",
        "opentelemetry.exporter.otlp.proto.grpc._log_exporter",
    ),
}


class TelemetryConfigurationError(ValueError):
    """The requested telemetry cannot be built (unsupported protocol, missing exporter).

    A ``ValueError`` so that the CLI reports it like any other bad option value.
    """


def _otlp_protocol(signal: str) -> str:
    """The OTLP protocol for ``signal`` per the standard variables (default http/protobuf)."""
    value = os.environ.get(f"OTEL_EXPORTER_OTLP_{signal}_PROTOCOL") or os.environ.get(
        "OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"
    )
    protocol = value.strip().lower()
    if protocol not in _OTLP_PACKAGES:
        raise TelemetryConfigurationError(
            f"OTLP protocol {value!r} is not supported; expected one of {sorted(_OTLP_PACKAGES)}"
        )
    return protocol


def _otlp_exporter(signal: str, class_name: str) -> Any:
    """Import and build the OTLP exporter for ``signal``; it reads OTEL_EXPORTER_OTLP_* itself."""
    distribution, metric_module, log_module = _OTLP_PACKAGES[_otlp_protocol(signal)]
    module_name = metric_module if signal == "METRICS" else log_module
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise TelemetryConfigurationError(
            f"telemetry 'otlp' needs the package {distribution!r}, which is not installed "
            f"(pip install {distribution})"
        ) from error
    return getattr(module, class_name)()


def build_telemetry(
    kind: str,
    *,
    product_analytics: ProductAnalytics | None = None,
    resource_attributes: Mapping[str, str] | None = None,
) -> GuardTelemetry:
    """Build the sink named by ``kind`` (the values of ``agent --telemetry``).

    Errors name the kind, never the command line's flag: library code calls this too.

    ``none`` records nothing.  ``console`` prints metrics (at each export
    interval and at exit) and log records to **stderr**: stdout carries the
    ACP protocol.  ``otlp`` exports through the OTLP exporters, configured
    by the standard ``OTEL_EXPORTER_OTLP_*`` variables.  ``file:PATH``
    appends OTLP JSON lines to PATH (:mod:`~tool_failure_guard.telemetry.otlp_file`).  The
    providers shut down (and flush) at interpreter exit.
    """
    if kind == "none":
        return NullTelemetry()
    file_path = kind[len(FILE_KIND_PREFIX) :] if kind.startswith(FILE_KIND_PREFIX) else None
    if file_path is not None and not file_path:
        raise ValueError("telemetry 'file:PATH' needs a path")
    if file_path is None and kind not in TELEMETRY_KINDS:
        raise ValueError(f"telemetry kind {kind!r} is not one of {TELEMETRY_KINDS} or 'file:PATH'")

    from tool_failure_guard._extras import MissingExtra, require_extra

    try:
        require_extra("telemetry", "opentelemetry.sdk", "google.protobuf", "opentelemetry.proto")
    except MissingExtra as missing:
        raise TelemetryConfigurationError(f"telemetry {kind!r}: {missing}") from missing
    from opentelemetry.sdk._logs import LoggerProvider as SdkLoggerProvider
    from opentelemetry.sdk._logs.export import (
        BatchLogRecordProcessor,
        ConsoleLogRecordExporter,
        SimpleLogRecordProcessor,
    )
    from opentelemetry.sdk.metrics import MeterProvider as SdkMeterProvider
    from opentelemetry.sdk.metrics.export import (
        ConsoleMetricExporter,
        PeriodicExportingMetricReader,
    )

    resource = telemetry_resource(resource_attributes)
    if file_path is not None:
        from pathlib import Path

        from tool_failure_guard.telemetry.otlp_file import (
            OtlpJsonFile,
            OtlpJsonLogExporter,
            OtlpJsonMetricExporter,
        )

        try:
            target = OtlpJsonFile(Path(file_path))
        except OSError as error:
            raise TelemetryConfigurationError(
                f"telemetry 'file:': cannot open {file_path!r} for appending "
                f"({error.strerror or type(error).__name__})"
            ) from error
        metric_exporter: Any = OtlpJsonMetricExporter(target)
        log_processor: Any = BatchLogRecordProcessor(OtlpJsonLogExporter(target))
    elif kind == "console":
        metric_exporter = ConsoleMetricExporter(out=sys.stderr)
        log_processor = SimpleLogRecordProcessor(ConsoleLogRecordExporter(out=sys.stderr))
    else:
        metric_exporter = _otlp_exporter("METRICS", "OTLPMetricExporter")
        log_processor = BatchLogRecordProcessor(_otlp_exporter("LOGS", "OTLPLogExporter"))
    meter_provider = SdkMeterProvider(
        resource=resource, metric_readers=[PeriodicExportingMetricReader(metric_exporter)]
    )
    logger_provider = SdkLoggerProvider(resource=resource)
    logger_provider.add_log_record_processor(log_processor)
    return OpenTelemetrySink(
        meter_provider=meter_provider,
        logger_provider=logger_provider,
        product_analytics=product_analytics,
    )
