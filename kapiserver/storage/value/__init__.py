"""Value transformers: what stored bytes go through between the Store and the backend
(upstream's ``k8s.io/apiserver/pkg/storage/value``): encryption at rest."""
