"""Long loops on the reactor thread give other requests a turn now and then."""
from __future__ import annotations

from twisted.internet import defer


def yield_to_reactor() -> defer.Deferred:
    """A Deferred firing on the reactor's next turn (``await`` it between batches of work)."""
    from twisted.internet import reactor
    d: defer.Deferred = defer.Deferred()
    reactor.callLater(0, d.callback, None)
    return d
