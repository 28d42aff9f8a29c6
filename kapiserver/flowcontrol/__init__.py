"""API Priority and Fairness (upstream's apiserver/pkg/util/flowcontrol).

Requests are classified by the FlowSchemas (``rules.py``) into a priority
level and a flow; each limited level shares the server's concurrency by its
``nominalConcurrencyShares`` and queues what it cannot run at once in a fair
queue set (``queueset.py``, shuffle sharding in ``shuffle_sharding.py``).
``controller.py`` turns the stored configuration objects into that state,
``bootstrap.py`` holds upstream's default objects, ``api.py`` the defaulting
and matching order it shares with the kinds, ``work_estimate.py`` how many
seats a request takes, ``metrics.py`` its metrics.  The filter is
``endpoints/filters/priority_and_fairness.py``, the dump endpoints
``server/flowcontrol_debug.py``.
"""
