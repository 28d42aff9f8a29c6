"""``--encryption-provider-config``: which resources are encrypted at rest, and how.

The file is upstream's ``apiserver.config.k8s.io/v1`` ``EncryptionConfiguration``::

    apiVersion: apiserver.config.k8s.io/v1
    kind: EncryptionConfiguration
    resources:
      - resources: [secrets]          # also "*." (core group), "*.apps", "*.*"
        providers:
          - aescbc:
              keys:
                - name: key1
                  secret: <base64 of 32 random bytes>
          - identity: {}

Per resource the providers are tried in order when reading (a value is read
by the provider whose prefix it carries: ``k8s:enc:aescbc:v1:key1:``) and
the first one encrypts every write, so rotating a key is: add the new key
first, restart, rewrite every object, drop the old key.  A resource named by
no rule is stored as is (and an encrypted value of it is an error, as
upstream).  The checks and their messages are upstream's
``ValidateEncryptionConfiguration``; ``kms`` providers are refused (kapiserver
has no KMS plugin client).
"""
from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass
from typing import Any, Callable, Optional

import yaml

from kapiserver.storage.value.aes import AESCBC, AESGCM
from kapiserver.storage.value.secretbox import Secretbox
from kapiserver.storage.value.transformer import Identity, PrefixTransformer, PrefixTransformers, Transformer

API_VERSION = "apiserver.config.k8s.io/v1"
KIND = "EncryptionConfiguration"
PREFIXES = {"aescbc": b"k8s:enc:aescbc:v1:", "aesgcm": b"k8s:enc:aesgcm:v1:", "secretbox": b"k8s:enc:secretbox:v1:"}
KEY_SIZES = {"aescbc": (16, 24, 32), "aesgcm": (16, 24, 32), "secretbox": (32,)}
PROVIDER_NAMES = ("kms", "aesgcm", "aescbc", "secretbox", "identity")
_NO_KEY = {"aescbc": "no matching key was found for the provided AES transformer",
           "aesgcm": "no matching key was found for the provided AES transformer",
           "secretbox": "no matching key was found for the provided Secretbox transformer"}
_CIPHERS: dict[str, Callable[[bytes], Transformer]] = {"aescbc": AESCBC, "aesgcm": AESGCM, "secretbox": Secretbox}

GroupResource = tuple[str, str]  # (group, resource); "*" wildcards as in the file
ANY = ("*", "*")


class EncryptionConfigError(Exception):
    """The file is unusable; ``str()`` is one line for the operator."""


def parse_group_resource(text: str) -> GroupResource:
    """Upstream's ``schema.ParseGroupResource``: ``deployments.apps`` → (apps, deployments)."""
    resource, _, group = text.partition(".")
    return group, resource


def _yaml_name(gr: GroupResource) -> str:
    group, resource = gr
    if gr == ("", "*"):
        return "*."
    return f"{resource}.{group}" if group else resource


@dataclass(frozen=True)
class EncryptionConfig:
    """The transformers per resource, with upstream's precedence: exact, ``*.<group>``, ``*.*``."""

    rules: dict[GroupResource, Transformer]

    def transformer_for(self, group: str, resource: str) -> Optional[Transformer]:
        """The transformer of a resource, or None when no rule names it (stored as is)."""
        return (self.rules.get((group, resource)) or self.rules.get((group, "*")) or self.rules.get(ANY))

    def encrypts(self, group: str, resource: str) -> bool:
        return self.transformer_for(group, resource) is not None


# ---------------------------------------------------------------- validation (upstream's wording)

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def _invalid(path: str, value: Any, detail: str) -> str:
    return f"{path}: Invalid value: {_go_value(value)}: {detail}"


def _required(path: str, detail: str) -> str:
    return f"{path}: Required value: {detail}" if detail else f"{path}: Required value"


def _go_value(value: Any) -> str:
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, list):
        return "[]string{" + ", ".join(f'"{v}"' for v in value) + "}"
    return repr(value)


def _resource_problems(resources: list, path: str) -> list[str]:
    problems = []
    parsed = [parse_group_resource(r) for r in resources if isinstance(r, str)]
    if len(parsed) >= 2:
        duplicate = overlap = False
        for i, first in enumerate(parsed):
            for j, second in enumerate(parsed):
                if i == j:
                    continue
                if first == second:
                    duplicate = True
                    continue
                if first == ANY:
                    overlap = True
                elif first[0] == second[0] and "*" in (first[1], second[1]):
                    overlap = True
        if duplicate:
            problems.append(_invalid(path, resources, "the same resource cannot be specified multiple times"))
        if overlap:
            problems.append(_invalid(path, resources, "using overlapping resources such as 'secrets' and '*.' in "
                                                      "the same resource list is not allowed as they will be masked"))
    for j, name in enumerate(resources):
        where = f"{path}[{j}]"
        if not isinstance(name, str):
            problems.append(_invalid(where, name, "must be a string"))
            continue
        group, resource = parse_group_resource(name)
        if name != name.lower():
            problems.append(_invalid(where, name, "resource name should not contain capital letters"))
        elif name == "*":
            problems.append(_invalid(where, name, "use '*.' to encrypt all the resources from core API group or "
                                                  "*.* to encrypt all resources"))
        elif name in ("apiserveripinfo", "serviceipallocations", "servicenodeportallocations"):
            problems.append(_invalid(where, name, "resources which do not have REST API/s cannot be encrypted"))
        elif group == "events.k8s.io":
            problems.append(_invalid(where, name, "'*.events.k8s.io' objects are stored using the 'events' API "
                                                  "group in etcd. Use 'events' instead in the config file"))
        elif group == "extensions":
            problems.append(_invalid(where, name, "'extensions' group has been removed and cannot be used for "
                                                  "encryption"))
        elif group == "*" and resource != "*":
            problems.append(_invalid(where, name, "encrypting the same resource across groups is not supported"))
    return problems


def _key_problems(keys: Any, path: str, sizes: tuple[int, ...]) -> list[str]:
    if not isinstance(keys, list) or not keys:
        return [_required(path, "at least one keys is required")]
    problems = []
    for i, key in enumerate(keys):
        where = f"{path}[{i}]"
        if not isinstance(key, dict):
            problems.append(_invalid(where, key, "must be an object with name and secret"))
            continue
        if not key.get("name"):
            problems.append(_required(f"{where}.name", "name is a mandatory field for a key"))
        elif ":" in str(key["name"]):
            problems.append(_invalid(f"{where}.name", key["name"], "must not contain ':'"))
        secret = key.get("secret")
        if not secret:
            problems.append(_required(f"{where}.secret", "secret is a mandatory field for a key"))
            continue
        try:
            raw = base64.b64decode(str(secret), validate=True)
        except (binascii.Error, ValueError):
            problems.append(_invalid(f"{where}.secret", "REDACTED", "secrets must be base64 encoded"))
            continue
        if len(raw) not in sizes:
            problems.append(_invalid(f"{where}.secret", "REDACTED",
                                     f"secret is not of the expected length, got {len(raw)}, expected one of "
                                     f"[{' '.join(str(s) for s in sizes)}]"))
    return problems


def validate(document: Any) -> list[str]:
    """Upstream's validation of an EncryptionConfiguration; one string per problem."""
    if not isinstance(document, dict):
        return ["EncryptionConfiguration can't be nil"]
    resources = document.get("resources")
    if not isinstance(resources, list) or not resources:
        return [_required("resources", "at least one resources is required")]
    problems: list[str] = []
    for i, rule in enumerate(resources):
        base = f"resources[{i}]"
        if not isinstance(rule, dict):
            problems.append(_invalid(base, rule, "must be an object with resources and providers"))
            continue
        names = rule.get("resources")
        if not isinstance(names, list) or not names:
            problems.append(_required(f"{base}.resources", f"at least one {base}.resources is required"))
            names = []
        problems += _resource_problems(names, f"{base}.resources")
        providers = rule.get("providers")
        if not isinstance(providers, list) or not providers:
            problems.append(_required(f"{base}.providers", f"at least one {base}.providers is required"))
            continue
        for j, provider in enumerate(providers):
            where = f"{base}.providers[{j}]"
            found = [name for name in PROVIDER_NAMES if isinstance(provider, dict) and provider.get(name) is not None]
            if not found:
                problems.append(_invalid(where, provider, "provider does not contain any of the expected "
                                                          "providers: KMS, AESGCM, AESCBC, Secretbox, Identity"))
                continue
            if len(found) > 1 or len(provider) > 1:
                problems.append(_invalid(where, provider, "more than one provider specified in a single element, "
                                                          "should split into different list elements"))
                continue
            kind = found[0]
            if kind == "kms":
                problems.append(_invalid(f"{where}.kms", provider["kms"].get("name", "") if isinstance(
                    provider["kms"], dict) else "", "KMS providers are not supported by kapiserver: use aescbc, "
                                                     "aesgcm or secretbox"))
            elif kind in KEY_SIZES:
                section = provider[kind]
                keys = section.get("keys") if isinstance(section, dict) else None
                problems += _key_problems(keys, f"{where}.{kind}.keys", KEY_SIZES[kind])
    return problems


# ---------------------------------------------------------------- building

def _provider(kind: str, section: Any) -> PrefixTransformer:
    if kind == "identity":
        return PrefixTransformer(b"", Identity())
    keys = [PrefixTransformer(f"{key['name']}:".encode(), _CIPHERS[kind](base64.b64decode(key["secret"])))
            for key in section["keys"]]
    return PrefixTransformer(PREFIXES[kind], PrefixTransformers(keys, _NO_KEY[kind]))


def build(document: dict) -> EncryptionConfig:
    """The transformers of a validated document; a rule masked by an earlier wildcard is an error."""
    chains: dict[GroupResource, list[PrefixTransformer]] = {}
    for rule in document["resources"]:
        providers = []
        for provider in rule["providers"]:
            kind = next(name for name in PROVIDER_NAMES if provider.get(name) is not None)
            providers.append(_provider(kind, provider[kind]))
        for name in rule["resources"]:
            gr = parse_group_resource(name)
            for mask in ((gr[0], "*"), ANY):
                if mask in chains:
                    raise EncryptionConfigError(f"resource {_yaml_name(gr)!r} is masked by earlier rule "
                                                f"{_yaml_name(mask)!r}".replace("'", '"'))
            chains.setdefault(gr, []).extend(providers)
    return EncryptionConfig({gr: PrefixTransformers(chain, "no matching prefix found")
                             for gr, chain in chains.items()})


def parse(text: bytes | str, source: str = "<encryption config>") -> EncryptionConfig:
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError:
        raise EncryptionConfigError(f"{source}: not valid YAML or JSON") from None
    if not isinstance(document, dict):
        raise EncryptionConfigError(f"{source}: not an {KIND}")
    if document.get("kind") != KIND or document.get("apiVersion") != API_VERSION:
        raise EncryptionConfigError(f"{source}: expected apiVersion {API_VERSION} and kind {KIND}, got "
                                    f"{document.get('apiVersion')!r} {document.get('kind')!r}")
    problems = validate(document)
    if problems:
        joined = problems[0] if len(problems) == 1 else "[" + ", ".join(problems) + "]"
        raise EncryptionConfigError(f"{source}: error while parsing file: {joined}")
    try:
        return build(document)
    except EncryptionConfigError as e:
        raise EncryptionConfigError(f"{source}: error while parsing file: {e}") from None


def load(path: str) -> EncryptionConfig:
    try:
        with open(path, "rb") as f:
            text = f.read()
    except OSError as e:
        raise EncryptionConfigError(f"{path}: cannot read encryption provider configuration: {e.strerror}") \
            from None
    return parse(text, path)
