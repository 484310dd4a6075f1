"""An OpenTelemetrySink over in-memory pipelines, shared by the telemetry tests."""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.resources import Resource

from tool_failure_guard.telemetry.sink import (
    EVENT_NAME_ATTRIBUTE,
    LoopDetectedEvent,
    OpenTelemetrySink,
)


class Harness:
    """A sink over in-memory OpenTelemetry pipelines, plus a recording analytics sink."""

    def __init__(self, service_name: str = "test") -> None:
        resource = Resource.create({"service.name": service_name})
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(
            metric_readers=[self.reader], resource=resource, shutdown_on_exit=False
        )
        self.exporter = InMemoryLogRecordExporter()
        self.logger_provider = LoggerProvider(resource=resource, shutdown_on_exit=False)
        self.logger_provider.add_log_record_processor(SimpleLogRecordProcessor(self.exporter))
        self.analytics: list[LoopDetectedEvent] = []
        self.sink = OpenTelemetrySink(
            meter_provider=self.meter_provider,
            logger_provider=self.logger_provider,
            product_analytics=self.analytics.append,
        )

    def points(self, name: str) -> list[tuple[dict[str, Any], int]]:
        """(attributes, cumulative value) of every data point of metric ``name``."""
        data = self.reader.get_metrics_data()
        found: list[tuple[dict[str, Any], int]] = []
        if data is None:
            return found
        for resource_metrics in data.resource_metrics:
            for scope_metrics in resource_metrics.scope_metrics:
                for metric in scope_metrics.metrics:
                    if metric.name == name:
                        for point in metric.data.data_points:
                            found.append((dict(point.attributes or {}), int(point.value)))
        return found

    def logs(self, event_name: str) -> list[dict[str, Any]]:
        """Attributes of every exported log record with this event name, in order.

        Each record names its event twice, as OTLP's ``eventName`` and as the
        ``event.name`` attribute (the original's spelling): checked equal here, and the
        attribute left out of what is returned (the records' own fields).
        """
        found = []
        for record in self.exporter.get_finished_logs():
            if record.log_record.event_name != event_name:
                continue
            attributes = dict(record.log_record.attributes or {})
            assert attributes.pop(EVENT_NAME_ATTRIBUTE) == event_name
            found.append(attributes)
        return found
