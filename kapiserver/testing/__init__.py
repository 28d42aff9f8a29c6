"""Test support: servers, clients and etcd for the test suite."""

# What test servers advertise as the kubernetes Service's endpoint: an RFC 5737 documentation
# address, since Endpoints refuse loopback addresses as upstream's do (nothing is sent to it).
TEST_ADVERTISE_ADDRESS = "192.0.2.10"
