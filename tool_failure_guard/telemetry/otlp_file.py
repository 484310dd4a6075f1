"""``--telemetry file:PATH``: OTLP JSON lines, the encoding the Collector's file exporter writes.

Each export appends exactly one line: one JSON-encoded
``ExportLogsServiceRequest`` (or ``ExportMetricsServiceRequest``).  The
request is built by the OTLP encoders of
``opentelemetry-exporter-otlp-proto-common`` -- the same code the OTLP
exporters send over the wire -- and turned into JSON by protobuf's
``json_format`` with the OTLP/JSON rules applied: lowerCamelCase field
names, 64-bit integers as decimal strings, enums as integers, and
``traceId``/``spanId`` as **hex** (a generic protobuf-to-JSON conversion
gives base64 for bytes fields, which OTLP/JSON forbids).

So ``tool-failure-guard rollout`` reads exactly what a real collector's
``file`` exporter writes, and a real collector's output can be fed to it
unchanged.  Lines are appended under a lock and flushed per export, so a
reader never sees half a line from a live agent.
"""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import Message
from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
from opentelemetry.exporter.otlp.proto.common.metrics_encoder import encode_metrics
from opentelemetry.sdk._logs import ReadableLogRecord
from opentelemetry.sdk._logs.export import LogRecordExporter, LogRecordExportResult
from opentelemetry.sdk.metrics.export import (
    MetricExporter,
    MetricExportResult,
    MetricsData,
)

from tool_failure_guard.private_files import append_text

#: Bytes fields that OTLP/JSON writes as hex instead of base64.
_HEX_ID_FIELDS = frozenset({"traceId", "spanId", "parentSpanId"})


def _hex_ids(node: Any) -> Any:
    """Rewrite base64 ``traceId``/``spanId`` values (json_format's bytes encoding) as hex."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in _HEX_ID_FIELDS and isinstance(value, str):
                node[key] = base64.b64decode(value).hex()
            else:
                _hex_ids(value)
    elif isinstance(node, list):
        for item in node:
            _hex_ids(item)
    return node


def otlp_json(message: Message) -> str:
    """One OTLP/JSON line (without the newline) for an OTLP protobuf request."""
    data = json_format.MessageToDict(message, use_integers_for_enums=True)
    return json.dumps(_hex_ids(data), separators=(",", ":"), ensure_ascii=False)


class OtlpJsonFile:
    """An append-only OTLP JSON lines file shared by the log and metric exporters.

    Each exporter holds it open (:meth:`hold`) and lets go at its shutdown
    (:meth:`release`); the file closes when the last one lets go.  The providers shut
    down in either order (at interpreter exit the logger provider, created last, goes
    first), and the metric reader's last export comes after the log exporter's shutdown.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._holders = 0
        # Opened eagerly: an unwritable path is a configuration error, reported at start.
        self._stream = append_text(path)  # 0600, like the history

    def hold(self) -> None:
        with self._lock:
            self._holders += 1

    def release(self) -> None:
        """One exporter is done with the file; the last one closes it."""
        with self._lock:
            self._holders -= 1
            if self._holders <= 0 and not self._stream.closed:
                self._stream.close()

    def write(self, message: Message) -> None:
        line = otlp_json(message) + "\n"
        with self._lock:
            if self._stream.closed:
                return
            self._stream.write(line)
            self._stream.flush()

    def close(self) -> None:
        with self._lock:
            if not self._stream.closed:
                self._stream.close()


class OtlpJsonLogExporter(LogRecordExporter):
    """Log records -> one ``ExportLogsServiceRequest`` line per export."""

    def __init__(self, target: OtlpJsonFile) -> None:
        self._target = target
        target.hold()
        self._released = False

    def export(self, batch: Sequence[ReadableLogRecord]) -> LogRecordExportResult:
        if not batch:
            return LogRecordExportResult.SUCCESS
        try:
            self._target.write(encode_logs(batch))
        except Exception:
            return LogRecordExportResult.FAILURE
        return LogRecordExportResult.SUCCESS

    def shutdown(self) -> None:
        if not self._released:
            self._released = True
            self._target.release()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True


class OtlpJsonMetricExporter(MetricExporter):
    """Metrics -> one ``ExportMetricsServiceRequest`` line per export."""

    def __init__(self, target: OtlpJsonFile) -> None:
        super().__init__()
        self._target = target
        target.hold()
        self._released = False

    def export(
        self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: Any
    ) -> MetricExportResult:
        try:
            self._target.write(encode_metrics(metrics_data))
        except Exception:
            return MetricExportResult.FAILURE
        return MetricExportResult.SUCCESS

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return True

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        # The metric reader exports its last collection before calling this.
        if not self._released:
            self._released = True
            self._target.release()
