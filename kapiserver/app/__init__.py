"""The composition root: what assembles and runs the process.

The API server's assembly (``apiserver.py``), the authentication built from
the configuration (``authentication.py``), the twisted service that starts it
(``service.py``), the twistd plugin's options and ``makeService``
(``plugin.py``) and the worker processes (``workers.py``, ``worker.py``).
Every library below takes small typed dependencies; only this layer knows
them all.
"""
