"""YAML as kube-apiserver writes it: sigs.k8s.io/yaml (go-yaml v2 with its emitter's
string styles), map keys sorted.  Apart from :mod:`kapiserver.machinery.codec` so
that PyYAML loads with the first YAML answer, not with every start."""
from __future__ import annotations

import functools
import re
from typing import TYPE_CHECKING, Any, Optional

import yaml

if TYPE_CHECKING:  # (the C dumper's stubs do not say it is a SafeDumper; it behaves as one)
    from yaml import SafeDumper as YamlDumperBase
else:
    try:  # the C dumper is several times faster when libyaml is present
        from yaml import CSafeDumper as YamlDumperBase
    except ImportError:  # pragma: no cover
        from yaml import SafeDumper as YamlDumperBase

_STR_TAG = "tag:yaml.org,2002:str"
_RESOLVER = yaml.resolver.Resolver()  # the dumpers' (implicit types: YAML 1.1)
# strings go-yaml v2 reads as booleans that PyYAML's resolver does not
_GO_YAML_BOOLEANS = frozenset(("y", "Y", "n", "N"))


class _YamlDumper(YamlDumperBase):
    """Strings styled as sigs.k8s.io/yaml (go-yaml v2, a port of libyaml's emitter) styles them."""


def _go_yaml_string(dumper: Any, data: str) -> Any:
    style = _short_string_style(data) if len(data) <= 64 else _string_style(data)
    return dumper.represent_scalar(_STR_TAG, data, style=style)


def _string_style(data: str) -> Optional[str]:
    # go-yaml v2: a string with a line break asks for a literal block (the emitter falls back
    # to double quotes where one cannot hold it), one that would read back as another type
    # ("0", "true", "", a timestamp) for double quotes, any other for plain (else single
    # quotes, else double: the emitter's choice, libyaml's too)
    if "\n" in data:
        return "|"
    if (data in _GO_YAML_BOOLEANS or _go_yaml_number(data)
            or _RESOLVER.resolve(yaml.ScalarNode, data, (True, False)) != _STR_TAG):
        return '"'
    return None


# keys and short values repeat from object to object (the resolver's regexes cost more)
_short_string_style = functools.lru_cache(maxsize=4096)(_string_style)


# go-yaml v2's yamlStyleFloat: what it lets strconv.ParseFloat read as a float
_GO_YAML_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")


def _go_yaml_number(data: str) -> bool:
    """Whether go-yaml v2 reads the string as a number where PyYAML may not (``1e3``, ``0o17``):
    on what starts like a number, underscores removed, Go's ParseInt with base prefixes or its
    float syntax.  (``+inf`` and non-ASCII digits stay strings there.)"""
    if not data or data[0] not in "0123456789+-." or not data.isascii() or data != data.strip():
        return False
    plain = data.replace("_", "") if data[0] != "." else data
    try:
        int(plain, 0)  # Python's base prefixes are Go's (a leading-zero octal PyYAML resolves itself)
        return True
    except ValueError:
        return _GO_YAML_FLOAT.fullmatch(plain) is not None


_YamlDumper.add_representer(str, _go_yaml_string)


def encode(obj: Any) -> bytes:
    """YAML as upstream writes it (sigs.k8s.io/yaml: map keys sorted)."""
    return yaml.dump(obj, Dumper=_YamlDumper, default_flow_style=False, sort_keys=True,
                     allow_unicode=True).encode()
