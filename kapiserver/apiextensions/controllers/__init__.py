"""The CRD controllers: status conditions (naming, establishing, non-structural schema, API approval) and finalizing."""
