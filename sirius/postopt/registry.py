"""Every post-fusion pass by name. A new pass is one file in `sirius/postopt/` and one entry in
`_ALL` below; `sirius opt --list-passes` and pipeline strings then know it."""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType

from sirius.postopt.alias_facts import AliasFacts
from sirius.postopt.base import ModulePass
from sirius.postopt.common_base import CommonBase
from sirius.postopt.contract import Contract
from sirius.postopt.contract_shared import ContractShared
from sirius.postopt.host_constants import HostConstants
from sirius.postopt.licm import Licm
from sirius.postopt.llvm_opt import LlvmOpt
from sirius.postopt.loop_fuse import LoopFuse
from sirius.postopt.options import Option, options_of, type_text

__all__ = ["PASSES", "describe"]

_ALL: tuple[type[ModulePass], ...] = (
    LlvmOpt,
    HostConstants,
    CommonBase,
    AliasFacts,
    Contract,
    ContractShared,
    LoopFuse,
    Licm,
)

_KEBAB = re.compile(r"[a-z][a-z0-9]*(-[a-z0-9]+)*")


def _check(classes: tuple[type[ModulePass], ...]) -> Mapping[str, type[ModulePass]]:
    """The registry; TypeError for a pass that is not a frozen dataclass with a kebab-case
    name unique among the passes and options of supported types (a bug, found at import)."""
    out: dict[str, type[ModulePass]] = {}
    for cls in classes:
        params = getattr(cls, "__dataclass_params__", None)
        if params is None or not params.frozen:
            raise TypeError(f"pass {cls.__qualname__} is not a frozen dataclass")
        if not _KEBAB.fullmatch(getattr(cls, "name", "")):
            raise TypeError(f"pass {cls.__qualname__} has no kebab-case name")
        if cls.name in out:
            raise TypeError(f"two passes are named {cls.name}")
        options_of(cls)
        out[cls.name] = cls
    return MappingProxyType(out)


PASSES: Mapping[str, type[ModulePass]] = _check(_ALL)


def describe(cls: type[ModulePass]) -> dict[str, object]:
    """A pass for `--list-passes`: name, the first line of its docstring, its options."""
    doc = (cls.__doc__ or "").strip().splitlines()
    opts: tuple[Option, ...] = options_of(cls)
    return {"name": cls.name, "summary": doc[0] if doc else "",
            "requires": list(cls.requires),
            "options": [{"name": o.name, "accepts": type_text(o.type),
                         "default": None if o.required else o.default,
                         "required": o.required} for o in opts]}
