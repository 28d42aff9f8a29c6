"""The structured authentication configuration file (upstream's ``--authentication-config``).

An ``apiserver.config.k8s.io`` ``AuthenticationConfiguration`` (v1alpha1,
v1beta1 or v1) listing JWT authenticators: each names an issuer (``url``,
optional ``discoveryURL``, the ``certificateAuthority`` PEM that verifies it,
the ``audiences`` tokens must carry), ``claimValidationRules`` (a required
claim value, or a CEL expression over ``claims``), ``claimMappings``
(username, groups, uid by claim and prefix or by CEL expression; extra
attributes by CEL expression) and ``userValidationRules`` (CEL over
``user``).  The file is read and checked once, at start, as upstream
validates it; every CEL expression is compiled then, so a typo stops the
server instead of refusing tokens later.  :mod:`kapiserver.auth.oidc`
authenticates with it.
"""
from __future__ import annotations

import re
import urllib.parse
from dataclasses import dataclass, field
from typing import Any, Optional

import yaml

from kapiserver.machinery.codec import yaml_problem

API_VERSIONS = ("apiserver.config.k8s.io/v1alpha1", "apiserver.config.k8s.io/v1beta1", "apiserver.config.k8s.io/v1")
_EXTRA_KEY = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/[^\s]+$")


class AuthenticationConfigurationError(Exception):
    """The file is invalid; ``str()`` is one line naming the file and the field."""


@dataclass(frozen=True)
class Expression:
    """A compiled CEL expression and its source."""

    source: str
    program: Any


@dataclass(frozen=True)
class ClaimOrExpression:
    claim: str = ""
    prefix: Optional[str] = None
    expression: Optional[Expression] = None

    @property
    def configured(self) -> bool:
        return bool(self.claim) or self.expression is not None


@dataclass(frozen=True)
class ClaimValidationRule:
    claim: str = ""
    required_value: str = ""
    expression: Optional[Expression] = None
    message: str = ""


@dataclass(frozen=True)
class ExtraMapping:
    key: str
    value_expression: Expression


@dataclass(frozen=True)
class UserValidationRule:
    expression: Expression
    message: str = ""


@dataclass(frozen=True)
class JWTAuthenticatorConfig:
    url: str
    discovery_url: str
    certificate_authority: str
    audiences: tuple[str, ...]
    claim_validation_rules: tuple[ClaimValidationRule, ...] = ()
    username: ClaimOrExpression = ClaimOrExpression()
    groups: ClaimOrExpression = ClaimOrExpression()
    uid: ClaimOrExpression = ClaimOrExpression()
    extra: tuple[ExtraMapping, ...] = ()
    user_validation_rules: tuple[UserValidationRule, ...] = ()


@dataclass
class AuthenticationConfiguration:
    jwt: list[JWTAuthenticatorConfig] = field(default_factory=list)


class _Reader:
    def __init__(self, path: str) -> None:
        self.path = path

    def fail(self, where: str, message: str) -> AuthenticationConfigurationError:
        return AuthenticationConfigurationError(f"{self.path}: {where}: {message}")

    def mapping(self, value: Any, where: str) -> dict:
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise self.fail(where, "must be a mapping")
        return value

    def string(self, obj: dict, key: str, where: str) -> str:
        value = obj.get(key)
        if value is None:
            return ""
        if not isinstance(value, str):
            raise self.fail(f"{where}.{key}", "must be a string")
        return value

    def strings(self, obj: dict, key: str, where: str) -> list[str]:
        value = obj.get(key)
        if value is None:
            return []
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.fail(f"{where}.{key}", "must be a list of strings")
        return value

    def expression(self, source: str, where: str) -> Expression:
        from kapiserver.machinery.cel_runtime import cel  # imported only when a configuration uses CEL
        try:
            return Expression(source, cel.compile(source))
        except (ValueError, RuntimeError) as e:
            first = str(e).splitlines()[0] if str(e) else type(e).__name__
            raise self.fail(where, f"compilation failed: {first}") from None


def _https_url(reader: _Reader, value: str, where: str) -> None:
    parts = urllib.parse.urlsplit(value)
    if parts.scheme != "https" or not parts.netloc:
        raise reader.fail(where, f"Invalid value: {value!r}: must be an https URL")
    if parts.query or parts.fragment or parts.username or parts.password:
        raise reader.fail(where, f"Invalid value: {value!r}: must not contain a query, fragment or user info")


def _claim_or_expression(reader: _Reader, data: Any, where: str, prefixed: bool, required: bool
                         ) -> ClaimOrExpression:
    obj = reader.mapping(data, where)
    claim = reader.string(obj, "claim", where)
    source = reader.string(obj, "expression", where)
    prefix = obj.get("prefix")
    if prefix is not None and not isinstance(prefix, str):
        raise reader.fail(f"{where}.prefix", "must be a string")
    if claim and source:
        raise reader.fail(where, "claim and expression are mutually exclusive")
    if required and not claim and not source:
        raise reader.fail(where, "Required value: claim or expression is required")
    if prefixed and claim and prefix is None:
        raise reader.fail(f"{where}.prefix", "Required value: prefix is required when claim is set. It can be "
                                             "set to an empty string to disable prefixing")
    if source and prefix is not None:
        raise reader.fail(f"{where}.prefix", "prefix can't be set when expression is set")
    return ClaimOrExpression(claim, prefix, reader.expression(source, f"{where}.expression") if source else None)


def _jwt(reader: _Reader, data: Any, where: str) -> JWTAuthenticatorConfig:
    obj = reader.mapping(data, where)
    issuer = reader.mapping(obj.get("issuer"), f"{where}.issuer")
    url = reader.string(issuer, "url", f"{where}.issuer")
    if not url:
        raise reader.fail(f"{where}.issuer.url", "Required value")
    _https_url(reader, url, f"{where}.issuer.url")
    discovery = reader.string(issuer, "discoveryURL", f"{where}.issuer")
    if discovery:
        _https_url(reader, discovery, f"{where}.issuer.discoveryURL")
        if discovery.rstrip("/") == url.rstrip("/"):
            raise reader.fail(f"{where}.issuer.discoveryURL", "discoveryURL must be different from URL")
    ca = reader.string(issuer, "certificateAuthority", f"{where}.issuer")
    if ca:
        from cryptography import x509
        try:
            x509.load_pem_x509_certificates(ca.encode())
        except ValueError:
            raise reader.fail(f"{where}.issuer.certificateAuthority", "must be PEM certificates") from None
    audiences = reader.strings(issuer, "audiences", f"{where}.issuer")
    if not audiences:
        raise reader.fail(f"{where}.issuer.audiences", "Required value: at least one issuer.audiences is required")
    if len(set(audiences)) != len(audiences) or "" in audiences:
        raise reader.fail(f"{where}.issuer.audiences", "audiences must be unique and not empty")
    policy = reader.string(issuer, "audienceMatchPolicy", f"{where}.issuer")
    if (len(audiences) > 1 and policy != "MatchAny") or policy not in ("", "MatchAny"):
        raise reader.fail(f"{where}.issuer.audienceMatchPolicy",
                          f"Invalid value: {policy!r}: audienceMatchPolicy must be MatchAny for multiple audiences")

    rules = []
    for i, rule_data in enumerate(obj.get("claimValidationRules") or []):
        at = f"{where}.claimValidationRules[{i}]"
        rule = reader.mapping(rule_data, at)
        claim, source = reader.string(rule, "claim", at), reader.string(rule, "expression", at)
        if bool(claim) == bool(source):
            raise reader.fail(at, "exactly one of claim or expression is required")
        if claim and reader.string(rule, "message", at):
            raise reader.fail(f"{at}.message", "message can't be set when claim is set")
        if source and reader.string(rule, "requiredValue", at):
            raise reader.fail(f"{at}.requiredValue", "requiredValue can't be set when expression is set")
        rules.append(ClaimValidationRule(claim, reader.string(rule, "requiredValue", at),
                                         reader.expression(source, f"{at}.expression") if source else None,
                                         reader.string(rule, "message", at)))

    mappings = reader.mapping(obj.get("claimMappings"), f"{where}.claimMappings")
    username = _claim_or_expression(reader, mappings.get("username"), f"{where}.claimMappings.username", True, True)
    groups = _claim_or_expression(reader, mappings.get("groups"), f"{where}.claimMappings.groups", True, False)
    uid = _claim_or_expression(reader, mappings.get("uid"), f"{where}.claimMappings.uid", False, False)
    if uid.prefix is not None:
        raise reader.fail(f"{where}.claimMappings.uid.prefix", "uid has no prefix")
    extra = []
    keys: set[str] = set()
    for i, item in enumerate(mappings.get("extra") or []):
        at = f"{where}.claimMappings.extra[{i}]"
        entry = reader.mapping(item, at)
        key = reader.string(entry, "key", at)
        if not key or key != key.lower() or not _EXTRA_KEY.match(key) or key in keys:
            raise reader.fail(f"{at}.key", f"Invalid value: {key!r}: must be a unique, lower-case, domain-prefixed "
                                           f"path (example.org/foo)")
        keys.add(key)
        source = reader.string(entry, "valueExpression", at)
        if not source:
            raise reader.fail(f"{at}.valueExpression", "Required value")
        extra.append(ExtraMapping(key, reader.expression(source, f"{at}.valueExpression")))
    every_expression = " ".join(e.source for e in [*(r.expression for r in rules), username.expression,
                                                     *(x.value_expression for x in extra)] if e is not None)
    if username.expression is not None and re.search(r"claims\.email\b", username.expression.source) and \
            "claims.email_verified" not in every_expression:
        raise reader.fail(f"{where}.claimMappings.username.expression",
                          "claims.email_verified must be used in claimMappings.username.expression or "
                          "claimMappings.extra[*].valueExpression or claimValidationRules[*].expression when "
                          "claims.email is used in claimMappings.username.expression")

    user_rules = []
    for i, rule_data in enumerate(obj.get("userValidationRules") or []):
        at = f"{where}.userValidationRules[{i}]"
        rule = reader.mapping(rule_data, at)
        source = reader.string(rule, "expression", at)
        if not source:
            raise reader.fail(f"{at}.expression", "Required value")
        user_rules.append(UserValidationRule(reader.expression(source, f"{at}.expression"),
                                             reader.string(rule, "message", at)))
    return JWTAuthenticatorConfig(url=url, discovery_url=discovery, certificate_authority=ca,
                                  audiences=tuple(audiences), claim_validation_rules=tuple(rules),
                                  username=username, groups=groups, uid=uid, extra=tuple(extra),
                                  user_validation_rules=tuple(user_rules))


def parse_authentication_configuration(text: str, path: str,
                                       service_account_issuers: tuple[str, ...] = ()) -> AuthenticationConfiguration:
    reader = _Reader(path)
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise AuthenticationConfigurationError(f"{path}: invalid YAML: {yaml_problem(e)}") from None
    obj = reader.mapping(data, "the document")
    if obj.get("kind") != "AuthenticationConfiguration" or obj.get("apiVersion") not in API_VERSIONS:
        raise AuthenticationConfigurationError(
            f"{path}: not an AuthenticationConfiguration of {', '.join(API_VERSIONS)}")
    unknown = set(obj) - {"apiVersion", "kind", "jwt", "anonymous"}
    if unknown:
        raise reader.fail(sorted(unknown)[0], "unknown field")
    if obj.get("anonymous") is not None:
        raise reader.fail("anonymous", "not supported by kapiserver: use the authentication.anonymous key")
    jwt = obj.get("jwt") or []
    if not isinstance(jwt, list):
        raise reader.fail("jwt", "must be a list")
    config = AuthenticationConfiguration([_jwt(reader, item, f"jwt[{i}]") for i, item in enumerate(jwt)])
    seen: set[str] = set()
    for i, authenticator in enumerate(config.jwt):
        if authenticator.url in seen:
            raise reader.fail(f"jwt[{i}].issuer.url", f"Duplicate value: {authenticator.url!r}")
        if authenticator.url in service_account_issuers:
            raise reader.fail(f"jwt[{i}].issuer.url", f"Invalid value: {authenticator.url!r}: URL must not "
                                                      f"overlap with disallowed issuers: {list(service_account_issuers)}")
        seen.add(authenticator.url)
    return config


def load_authentication_configuration(path: str, service_account_issuers: tuple[str, ...] = ()
                                      ) -> AuthenticationConfiguration:
    """Read and check ``path`` (blocking: at start)."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        raise AuthenticationConfigurationError(f"{path}: authentication configuration not found") from None
    except OSError as e:
        raise AuthenticationConfigurationError(f"{path}: cannot read: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise AuthenticationConfigurationError(f"{path}: cannot read: {e}") from None
    return parse_authentication_configuration(text, path, service_account_issuers)
