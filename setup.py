from setuptools import find_packages, setup
from setuptools.command.editable_wheel import editable_wheel


class _EditableWheel(editable_wheel):
    """`pip install -e .` in "compat" mode: the checkout goes on sys.path, so
    twisted's plugin scan finds twisted/plugins/kapiserver_plugin.py
    (the default strict mode hides it behind an import hook twistd cannot scan)."""

    def finalize_options(self):
        super().finalize_options()
        if not self.mode:
            self.mode = "compat"


setup(
    name="kapiserver",
    version="0.1.0",
    description="A Kubernetes API server in Python on Twisted",
    packages=find_packages(include=["kapiserver", "kapiserver.*"]) + ["twisted.plugins"],
    package_data={"twisted.plugins": ["kapiserver_plugin.py"]},
    python_requires=">=3.10",
    install_requires=[
        "twisted[tls,http2]>=24.3",
        "treq>=23.11",
        "txaio>=23.1",
        "pyopenssl>=24",
        "service-identity>=24",
        "cryptography>=42",
        "PyYAML>=6",
        "orjson>=3.9",
        "kubernetes-validate>=1.37,<1.38",
        "prometheus-client>=0.20",
        "common-expression-language>=0.10",
    ],
    extras_require={"test": ["kubernetes>=30"]},
    cmdclass={"editable_wheel": _EditableWheel},
)
