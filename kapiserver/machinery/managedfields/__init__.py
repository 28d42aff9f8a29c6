"""Field ownership: ``metadata.managedFields`` and server-side apply.

The structured-merge-diff model (sigs.k8s.io/structured-merge-diff, as
kube-apiserver uses it) rebuilt on plain JSON values:

* :mod:`.fieldpath` — path elements, sets of field paths, the ``FieldsV1``
  wire format;
* :mod:`.schema` — the list/map semantics of a kind, compiled from its
  OpenAPI schema (built-in definitions or a CRD's structural schema);
* :mod:`.typed` — walks of a value against its type: validation, field sets,
  comparison, merge, removal;
* :mod:`.updater` — ownership bookkeeping for updates and applies (conflicts,
  ownership transfer, pruning of fields an applier stopped applying);
* :mod:`.entries` — ``ManagedFieldsEntry`` lists to and from managers' sets;
* :mod:`.conflicts` — the 409 an apply conflict answers;
* :mod:`.fieldmanager` — upstream's field manager chain (manager names,
  ``before-first-apply``, the update-manager cap, stripped metadata, the
  client-side-apply annotation);
* :mod:`.scale` — ownership of ``spec.replicas`` through the scale subresource.
"""
