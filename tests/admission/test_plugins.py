"""The plugin registry and its configuration: upstream's order, enable/disable rules and
messages, the AdmissionConfiguration file, the chain's phases and reinvocation."""
from __future__ import annotations

import os
import tempfile

import yaml
from twisted.trial import unittest

from kapiserver.admission import plugins
from kapiserver.admission.config import AdmissionConfigError, read_admission_configuration
from kapiserver.apis.core import configmaps, pods
from kapiserver.registry.admission import (CREATE, DELETE, AdmissionChain, AdmissionPlugin, Attributes,
                                           ReinvocationContext)
from kapiserver.server.config import ConfigError, config_from_dict
from kapiserver.testing.cases import run


class RegistryTests(unittest.TestCase):
    def test_default_chain_is_upstreams_order(self):
        names = plugins.enabled_plugin_names()
        self.assertEqual(names[0], "NamespaceLifecycle")
        self.assertEqual(names[-4:], ["MutatingAdmissionWebhook", "ValidatingAdmissionPolicy",
                                      "ValidatingAdmissionWebhook", "ResourceQuota"])
        self.assertNotIn("AlwaysDeny", names)
        self.assertLess(names.index("LimitRanger"), names.index("ServiceAccount"))

    def test_enable_and_disable_keep_the_order(self):
        names = plugins.enabled_plugin_names(enable=["AlwaysDeny", "NamespaceAutoProvision"],
                                             disable=["MutatingAdmissionWebhook", "PodSecurity"])
        self.assertEqual(names[0], "NamespaceAutoProvision")
        self.assertEqual(names[-1], "AlwaysDeny")
        self.assertNotIn("MutatingAdmissionWebhook", names)
        self.assertNotIn("PodSecurity", names)

    def test_upstreams_messages_for_bad_names(self):
        self.assertEqual(plugins.validate_names(["Bogus"], ["AlwaysAdmit", "Nope"]),
                         ['enable-admission-plugins plugin "Bogus" is unknown',
                          'disable-admission-plugins plugin "Nope" is unknown'])
        self.assertEqual(plugins.validate_names(["AlwaysDeny", "LimitRanger"], ["LimitRanger", "AlwaysDeny"]),
                         ["[AlwaysDeny LimitRanger] in enable-admission-plugins and disable-admission-plugins "
                          "overlapped"])

    def test_bad_names_stop_the_server_configuration(self):
        with self.assertRaises(ConfigError) as caught:
            config_from_dict({"admission": {"enable_plugins": ["NotAPlugin"]}}, "apiserver.yaml")
        self.assertEqual(str(caught.exception), "apiserver.yaml: keys 'admission.enable_plugins' / "
                         "'admission.disable_plugins': enable-admission-plugins plugin \"NotAPlugin\" is unknown")

    def test_every_implemented_plugin_names_its_factory(self):
        # a built-in plugin's module is imported when a chain first enables it: each entry must name a
        # factory that exists, or enabling that plugin would fail only then
        self.assertEqual(len(plugins.registered()), 25)
        for name in plugins.registered():
            factory = plugins.plugin_factory(name)
            self.assertTrue(callable(factory), name)
        self.assertIsNone(plugins.plugin_factory("PodNodeSelector"))  # known upstream, not implemented

    def test_register_takes_only_upstream_names(self):
        with self.assertRaises(ValueError):
            plugins.register("MyPlugin", lambda config, deps: AdmissionPlugin())


class ConfigurationFileTests(unittest.TestCase):
    def write(self, data, name: str = "admission.yaml") -> str:
        directory = getattr(self, "dir", None) or tempfile.mkdtemp()
        self.dir = directory
        path = os.path.join(directory, name)
        with open(path, "w") as f:
            f.write(data if isinstance(data, str) else yaml.safe_dump(data))
        return path

    def test_inline_and_relative_path_configurations(self):
        self.write("podNodeSelectorPluginConfig: {}\n", "selector.yaml")
        path = self.write({"apiVersion": "apiserver.config.k8s.io/v1", "kind": "AdmissionConfiguration",
                           "plugins": [{"name": "ValidatingAdmissionWebhook", "configuration": {"a": 1}},
                                       {"name": "PodNodeSelector", "path": "selector.yaml"}]})
        configs = read_admission_configuration(path)
        self.assertEqual(yaml.safe_load(configs.config_for("ValidatingAdmissionWebhook")), {"a": 1})
        self.assertEqual(configs.config_for("PodNodeSelector"), b"podNodeSelectorPluginConfig: {}\n")
        self.assertIsNone(configs.config_for("LimitRanger"))

    def test_problems_are_one_line_errors(self):
        with self.assertRaises(AdmissionConfigError) as caught:
            read_admission_configuration("/nonexistent/admission.yaml")
        self.assertIn('unable to read admission control configuration from "/nonexistent/admission.yaml"',
                      str(caught.exception))
        path = self.write({"apiVersion": "apiserver.config.k8s.io/v1", "kind": "AdmissionConfiguration",
                           "plugin": []})
        with self.assertRaises(AdmissionConfigError) as caught:
            read_admission_configuration(path)
        self.assertIn('unknown field "plugin"', str(caught.exception))
        path = self.write({"apiVersion": "v1", "kind": "ConfigMap"})
        with self.assertRaises(AdmissionConfigError):
            read_admission_configuration(path)


class _Recorder(AdmissionPlugin):
    mutating = True
    validating = True
    operations = (CREATE,)

    def __init__(self, name: str, log: list, change: bool = False) -> None:
        self.name, self.log, self.change = name, log, change

    async def admit(self, attrs: Attributes) -> None:
        self.log.append(("admit", self.name, attrs.reinvocation.is_reinvoke))
        if self.change and not attrs.reinvocation.is_reinvoke:
            attrs.reinvocation.should_reinvoke = True

    async def validate(self, attrs: Attributes) -> None:
        self.log.append(("validate", self.name))


class ChainTests(unittest.TestCase):
    def attrs(self, operation: str = CREATE) -> Attributes:
        return Attributes(operation, configmaps.resource_type(), "default", "c", {"metadata": {}},
                          reinvocation=ReinvocationContext())

    @run
    async def test_phases_in_order_and_reinvocation_runs_the_mutating_phase_again(self):
        log: list = []
        chain = AdmissionChain([_Recorder("a", log), _Recorder("b", log, change=True)])
        attrs = self.attrs()
        await chain.admit(attrs)
        await chain.validate(attrs)
        self.assertEqual(log, [("admit", "a", False), ("admit", "b", False), ("admit", "a", True),
                               ("admit", "b", True), ("validate", "a"), ("validate", "b")])

    @run
    async def test_plugins_see_only_operations_they_handle(self):
        log: list = []
        chain = AdmissionChain([_Recorder("a", log)])
        await chain.admit(self.attrs(DELETE))
        self.assertEqual(log, [])

    @run
    async def test_plugins_see_only_resources_they_look_at(self):
        log: list = []
        pods_only = _Recorder("pods", log)
        pods_only.resources = frozenset({("", "pods")})
        chain = AdmissionChain([pods_only, _Recorder("any", log)])
        for _ in range(2):  # (the second write of the kind finds the phases the first worked out)
            attrs = self.attrs()
            await chain.admit(attrs)
            await chain.validate(attrs)
        self.assertEqual(log, [("admit", "any", False), ("validate", "any")] * 2)
        pod = Attributes(CREATE, pods.resource_type(), "default", "p", {"metadata": {}},
                         reinvocation=ReinvocationContext())
        await chain.admit(pod)
        self.assertEqual(log[4:], [("admit", "pods", False), ("admit", "any", False)])
