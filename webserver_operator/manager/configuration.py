"""The root settings object: every section of ``core.settings``, read from ``WEBSERVER_OPERATOR_*`` and ``run`` flags.

Why one model for both sources: the chart sets arguments or environment variables, people type flags, and both must
mean the same thing with the same validation. The ``run`` flags are generated from the section fields (name, help
text, default, type), so a setting cannot exist in one place and not the other. Flags override the environment.

Users see flat names (``--workers``, ``WEBSERVER_OPERATOR_WORKERS``); the code sees the tree (``settings.controller
.workers``). ``_nest`` puts each flat name into its section, for the environment and for keyword arguments alike.
Called by ``cli`` (``load_settings``); the sections go on to the layers they configure.

Invalid settings fail at start with the setting's name, its flag, its variable and what is allowed, before
anything talks to the cluster.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from pydantic import BaseModel, Field, ValidationError, model_validator
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from webserver_operator.core.settings import (
    ClientSettings,
    ControllerSettings,
    LeaderElectionSettings,
    LeaseSettings,
    LogSettings,
    ServerSettings,
    WatchSettings,
)

__all__ = ["Settings", "SettingsError", "add_arguments", "load_settings", "setting_fields"]

_ENV_PREFIX = "WEBSERVER_OPERATOR_"


class Settings(BaseSettings):
    """Everything ``webserver-operator run`` can be told, as a tree of sections (see ``core.settings``)."""

    model_config = SettingsConfigDict(env_prefix=_ENV_PREFIX, extra="forbid", frozen=True)

    client: ClientSettings = Field(default_factory=ClientSettings)
    watch: WatchSettings = Field(default_factory=WatchSettings)
    controller: ControllerSettings = Field(default_factory=ControllerSettings)
    leader_election: LeaderElectionSettings = Field(default_factory=LeaderElectionSettings)
    lease: LeaseSettings = Field(default_factory=LeaseSettings)
    server: ServerSettings = Field(default_factory=ServerSettings)
    log: LogSettings = Field(default_factory=LogSettings)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return init_settings, _FlatEnvironment(settings_cls)

    @model_validator(mode="before")
    @classmethod
    def _nest(cls, data: Any) -> Any:
        """Move flat names (``workers=3``) into their section; a flat value wins over a nested one."""
        if not isinstance(data, dict):
            return data
        nested: dict[str, Any] = {key: dict(value) if isinstance(value, dict) else value for key, value in data.items()}
        for flat, value in data.items():
            section = _SECTION_OF.get(flat)
            if section is None:
                continue
            del nested[flat]
            target = nested.setdefault(section, {})
            if isinstance(target, dict):
                target[flat] = value
        return nested


def _sections() -> dict[str, type[BaseModel]]:
    sections: dict[str, type[BaseModel]] = {}
    for name, field in Settings.model_fields.items():
        annotation = field.annotation
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            raise TypeError(f"Settings.{name} must be a section model, got {annotation!r}")
        sections[name] = annotation
    return sections


def setting_fields() -> dict[str, FieldInfo]:
    """Every user-facing setting by its flat name, in declaration order."""
    return {name: field for model in _sections().values() for name, field in model.model_fields.items()}


_SECTION_OF: dict[str, str] = {name: section for section, model in _sections().items() for name in model.model_fields}


class _FlatEnvironment(PydanticBaseSettingsSource):
    """``WEBSERVER_OPERATOR_<NAME>`` for every flat setting name (the variables the chart and users already set)."""

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False  # not used: __call__ reads the flat names directly

    def __call__(self) -> dict[str, Any]:
        return {
            name: os.environ[_ENV_PREFIX + name.upper()]
            for name in _SECTION_OF
            if os.environ.get(_ENV_PREFIX + name.upper(), "") != ""
        }


class SettingsError(Exception):
    """Settings could not be loaded; the message names each bad setting, its flag and its variable."""


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _default_text(field: FieldInfo) -> str:
    if "(default:" in (field.description or ""):
        return ""  # the description already says what an unset value means
    if field.default_factory is not None:
        value: Any = field.default_factory()  # type: ignore[call-arg]
    elif field.default is PydanticUndefined:
        return ""
    else:
        value = field.default
    if value is None or value == []:
        return " (default: unset)"
    if isinstance(value, bool):
        return f" (default: {'on' if value else 'off'})"
    return f" (default: {value})"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add one flag per setting; defaults stay None so only flags actually given override the environment."""
    for name, field in setting_fields().items():
        env = _ENV_PREFIX + name.upper()
        help_text = f"{field.description}{_default_text(field)} [env {env}]"
        if field.annotation is bool:
            parser.add_argument(_flag(name), dest=name, action=argparse.BooleanOptionalAction, help=help_text)
        else:
            parser.add_argument(_flag(name), dest=name, metavar=name.upper(), help=help_text)


def load_settings(args: argparse.Namespace | None = None) -> Settings:
    """Build Settings from the environment plus the flags in ``args``; raise SettingsError with a readable text."""
    overrides = {}
    if args is not None:
        overrides = {k: v for k, v in vars(args).items() if k in _SECTION_OF and v is not None}
    try:
        return Settings(**overrides)
    except ValidationError as err:
        lines = []
        for problem in err.errors():
            loc = [str(part) for part in problem["loc"]]
            name = next((part for part in reversed(loc) if part in _SECTION_OF), "")
            where = f"{name} ({_flag(name)} / {_ENV_PREFIX}{name.upper()})" if name else f"settings ({'.'.join(loc)})"
            message = str(problem["msg"]).removeprefix("Value error, ")
            lines.append(f"invalid setting {where}: {message} (got {problem.get('input')!r})")
        raise SettingsError("\n".join(lines)) from None
