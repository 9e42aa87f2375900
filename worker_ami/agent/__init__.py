"""The worker agent: the process that runs video jobs on each GPU instance."""
