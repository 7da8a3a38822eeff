"""The task's job on the cluster: which job is the task instance's (`identity`), whether a later try adopts
or replaces it (`reattach`), submitting, reading, waiting until gone and stopping it (`client`, and its async
twin `aio` for the triggers), and its next state from a watch (`changes`)."""
