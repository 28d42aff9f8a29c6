"""twistd plugin: ``twistd -n kapiserver --config etc/apiserver.yaml``.

Kept tiny on purpose: twistd imports every plugin module for ``--help``, so the
real work is imported lazily from kapiserver.app.plugin.
"""
from zope.interface import implementer

from twisted.application.service import IServiceMaker
from twisted.plugin import IPlugin
from twisted.python import usage


class _LazyOptions(usage.Options):
    def __new__(cls, *args, **kwargs):
        from kapiserver.app.plugin import Options
        return Options(*args, **kwargs)


@implementer(IServiceMaker, IPlugin)
class _KapiserverMaker:
    tapname = "kapiserver"
    description = "A Kubernetes API server on Twisted."
    options = _LazyOptions

    def makeService(self, options):
        from kapiserver.app.plugin import makeService
        return makeService(options)


kapiserver = _KapiserverMaker()
