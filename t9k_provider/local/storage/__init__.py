"""The API server's storage, kine-style: objects and an event log in SQLite under one global revision
(`store.Store`). The server's registry and its strategies read and write through it; nothing else does."""
