"""apiregistration.k8s.io: APIServices, served by the aggregator link of the delegation chain."""
