"""SES's SendRawEmail, behind the reports' `RawEmailSender` port."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from kernel.aws_errors import translated

if TYPE_CHECKING:
    from mypy_boto3_ses import SESClient


class SesSender:
    def __init__(self, ses: SESClient) -> None:
        self._ses = ses

    def send_raw(self, raw: bytes, sender: str, recipients: Sequence[str]) -> str:
        with translated("SendRawEmail"):
            answer = self._ses.send_raw_email(
                Source=sender, Destinations=list(recipients), RawMessage={"Data": raw}
            )
        return answer["MessageId"]
