"""The API server's HTTP handlers: `dispatch` routes a request to its verb; `list`, `watch` and `delete` are
the verbs with behaviour of their own (get, create, update and patch are one call each into `Objects`)."""
