"""The alerts the service takes: Prometheus Alertmanager's webhook (version 4) and one plain alert.

Both are pydantic models, so a malformed payload is answered 422 with the field that is wrong.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class Alert(BaseModel):
    """One alert: Alertmanager's element of ``alerts``, and the plain ``POST /alerts`` body."""

    status: Literal["firing", "resolved"] = "firing"
    labels: dict[str, str] = Field(min_length=1)
    annotations: dict[str, str] = {}
    startsAt: str | None = None
    endsAt: str | None = None
    generatorURL: str | None = None
    fingerprint: str | None = None

    def key(self) -> str:
        """Alertmanager's fingerprint, or one computed the same way from the labels: the same alert
        posted plainly and by Alertmanager is one alert (it had a key of each kind)."""
        return self.fingerprint or labels_fingerprint(self.labels)


FNV64_OFFSET, FNV64_PRIME = 14695981039346656037, 1099511628211
SEPARATOR = b"\xff"  # a byte no UTF-8 text holds: between a name and its value, and after each


def labels_fingerprint(labels: dict[str, str]) -> str:
    """Alertmanager's fingerprint of an alert's labels (prometheus/common ``labelSetToFingerprint``,
    written out by Alertmanager's webhook as ``%016x``): FNV-1a 64 over the label names in sorted
    order, each name and each value followed by 0xff."""
    h = FNV64_OFFSET
    for name in sorted(labels):  # byte order of UTF-8 is code point order
        for byte in name.encode() + SEPARATOR + labels[name].encode() + SEPARATOR:
            h = ((h ^ byte) * FNV64_PRIME) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


class AlertmanagerPayload(BaseModel):
    """The webhook body Alertmanager POSTs (https://prometheus.io/docs/alerting/latest/configuration/#webhook_config)."""

    version: Literal["4"]
    groupKey: str
    truncatedAlerts: int = 0
    status: Literal["firing", "resolved"]
    receiver: str
    groupLabels: dict[str, str] = {}
    commonLabels: dict[str, str] = {}
    commonAnnotations: dict[str, str] = {}
    externalURL: str = ""
    alerts: list[Alert] = Field(min_length=1)
