"""The HTTP API and the web console: jobs submitted, followed and cancelled, the fleet and the
money, over HTTP with scoped tokens (FastAPI, served by uvicorn inside `framefleet serve`)."""
