"""Auditing: a record of who did what, kept by the policy's rules (upstream's ``k8s.io/apiserver/pkg/audit``).

``policy.py`` decides per request, ``event.py`` builds each request's event
through its stages, ``log_backend.py`` and ``webhook_backend.py`` deliver it;
the filters ``endpoints/filters/audit_init.py`` and ``endpoints/filters/audit.py``
place it in the handler chain, and ``build.py`` makes it from the configuration.
"""
