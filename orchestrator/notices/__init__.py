"""Completion notices (issue 49): each job's end, and where asked its interruptions and
resumes, told to its producer's webhook (signed) and to the deployment's EventBridge bus,
through an outbox in the store."""
