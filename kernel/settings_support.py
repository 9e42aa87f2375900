"""Shared plumbing for settings (pydantic-settings) and command-line entry points."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar, NoReturn, TypeVar

from pydantic import ValidationError
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, TomlConfigSettingsSource
from pythonjsonlogger.json import JsonFormatter

from kernel.errors import ConfigurationError, FrameFleetError
from kernel.log_context import ContextFilter

SettingsT = TypeVar("SettingsT", bound=BaseSettings)


class EnvThenTomlSettings(BaseSettings):
    """Arguments, then environment, then the TOML file named by the variable `config_file_env`
    (if set), then defaults. Dotenv files and secret directories are not read."""

    config_file_env: ClassVar[str] = ""

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        if cls.config_file_env and (config_file := os.environ.get(cls.config_file_env)):
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=Path(config_file)))
        return tuple(sources)


def load(settings_cls: type[SettingsT], what: str) -> SettingsT:
    """Build settings; any problem becomes one ConfigurationError line, never a traceback."""
    try:
        return settings_cls()
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}"
            for e in error.errors(include_input=False)
        )
        raise ConfigurationError(f"invalid {what}: {problems}") from None
    except (OSError, ValueError) as error:
        raise ConfigurationError(f"cannot read {what}: {error}") from None


# The packages whose loggers a log level applies to; libraries stay at INFO or above unless
# asked, because at DEBUG botocore logs credentials and request bodies (whole job specs).
OUR_LOGGERS = ("framefleet", "kernel", "orchestrator", "autoscaler", "worker_ami", "simulator")
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"
LOG_FORMATS = ("text", "json")


def configure_logging(
    level: str, libraries_level: str | None = None, log_format: str = "text"
) -> None:
    """`level` for FrameFleet's own loggers; `libraries_level` (default: INFO, or `level` if
    that is quieter) for everything else. `log_format` "json": one JSON object per line
    (python-json-logger) with time, level, logger, message and the job, attempt, worker and
    instance ids bound where the line was written (`kernel/log_context.py`)."""
    try:
        ours = logging.getLevelNamesMapping()[level.upper()]
        theirs = (
            logging.getLevelNamesMapping()[libraries_level.upper()]
            if libraries_level
            else max(ours, logging.INFO)
        )
    except KeyError as error:
        raise ConfigurationError(f"unknown log level {error.args[0]!r}") from None
    if log_format not in LOG_FORMATS:
        raise ConfigurationError(f"unknown log format {log_format!r}: one of {LOG_FORMATS}")
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(ContextFilter())
    if log_format == "json":
        handler.setFormatter(
            JsonFormatter(
                "%(asctime)s %(levelname)s %(name)s %(message)s",
                rename_fields={"asctime": "time", "levelname": "level", "name": "logger"},
            )
        )
    else:
        handler.setFormatter(logging.Formatter(LOG_FORMAT))
    logging.basicConfig(level=theirs, handlers=[handler], force=True)
    for name in OUR_LOGGERS:
        logging.getLogger(name).setLevel(ours)
    # Migration chatter is noise on every command; failures still surface as errors.
    logging.getLogger("alembic").setLevel(max(theirs, logging.WARNING))


def exit_with(program: str, run: Callable[[], int]) -> NoReturn:
    """Run a command; an expected failure is one line on stderr and exit status 2."""
    try:
        code = run()
    except FrameFleetError as error:
        print(f"{program}: error: {error}", file=sys.stderr)
        code = 2
    except KeyboardInterrupt:
        code = 130
    sys.exit(code)
