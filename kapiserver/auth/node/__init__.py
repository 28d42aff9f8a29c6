"""The Node authorizer (``authorization.modes: [Node, ...]``), upstream's plugin/pkg/auth/authorizer/node.

``identifier.py`` tells a kubelet's user (``system:node:<name>`` in ``system:nodes``),
``graph.py`` holds which objects each node's pods reach, ``graph_populator.py`` keeps the graph
current from the Stores' watches, ``authorizer.py`` decides.
"""
