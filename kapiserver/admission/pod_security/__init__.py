"""PodSecurity admission: the Pod Security Standards (``checks``) and the plugin that applies them."""
