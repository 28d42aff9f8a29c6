"""What a request is about, parsed once and read by every layer that decides on it
(upstream's ``k8s.io/apiserver/pkg/endpoints/request``): authorization, flow control's
classification and work estimates, metrics, and the endpoints that serve it."""
