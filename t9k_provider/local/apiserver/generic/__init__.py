"""What the API server and its per-resource strategies share, as Kubernetes' generic registry: a served
resource and its strategy (`resources`), object-meta validation, the server's Status errors, and the RBAC
authorizer (access reviews evaluate it too). It imports nothing of the server or of the strategies."""
