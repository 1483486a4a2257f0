#!/bin/sh
# Chromium on the tests' second host: playwright-core starts this in place of the
# browser, which then runs inside the network namespace GATEWAY_TEST_NETNS.
exec ip netns exec "$GATEWAY_TEST_NETNS" "${CHROMIUM_PATH:-/usr/bin/chromium}" "$@"
