"""Role-based access control: Roles, ClusterRoles and their bindings enforced (upstream's RBAC authorizer)."""
