"""flowcontrol.apiserver.k8s.io/v1: FlowSchemas and PriorityLevelConfigurations (API Priority and Fairness)."""
