"""MQTT transport (aiomqtt) shared by the control plane and the worker agent."""
