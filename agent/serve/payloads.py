"""The alerts the service takes: Prometheus Alertmanager's webhook (version 4) and one plain alert.

Both are pydantic models, so a malformed payload is answered 422 with the field that is wrong.
"""

from __future__ import annotations

import hashlib
import json
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
        """Alertmanager's fingerprint, or one computed the same way from the labels."""
        if self.fingerprint:
            return self.fingerprint
        return hashlib.sha256(json.dumps(self.labels, sort_keys=True).encode()).hexdigest()[:16]


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
