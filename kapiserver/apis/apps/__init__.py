"""apps/v1: Deployments, ReplicaSets, StatefulSets, DaemonSets, ControllerRevisions."""
