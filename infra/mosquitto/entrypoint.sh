#!/bin/sh
# The broker image's entrypoint: on first start, create the dynamic-security file with the
# autoscaler's admin account (its password from the task's secret), then run Mosquitto. The
# autoscaler creates every other account over the plugin's control topic: the control
# plane's, and one per worker instance (autoscaler/credentials).
set -eu

CONFIG="${MOSQUITTO_CONFIG:-/mosquitto/config/mosquitto.conf}"
DYNSEC_FILE="${MOSQUITTO_DYNSEC_FILE:-/mosquitto/data/dynamic-security.json}"
ADMIN="${FRAMEFLEET_BROKER_ADMIN:-framefleet-autoscaler}"

if [ ! -s "$DYNSEC_FILE" ]; then
  : "${FRAMEFLEET_BROKER_ADMIN_PASSWORD:?the admin password is needed on first start}"
  umask 077
  mosquitto_ctrl dynsec init "$DYNSEC_FILE" "$ADMIN" "$FRAMEFLEET_BROKER_ADMIN_PASSWORD" >/dev/null
fi
# Later starts keep the file's accounts; the password lives on only in its hash.
unset FRAMEFLEET_BROKER_ADMIN_PASSWORD
exec mosquitto -c "$CONFIG"
