# The nats-server pinned in deploy/nats/VERSION, built from the Go module proxy by
# tools/ensure-compose.sh (or ensure-services.sh), with Cairn's configurations under /etc/cairn/nats.
# Built by `cairn images build --stack`, which lays out the context and fills in the base's tag.
FROM {{base}}
COPY nats-server /usr/local/bin/nats-server
COPY nats /etc/cairn/nats
RUN install -d -o 10002 -g 10002 -m 0700 /var/lib/cairn /var/lib/cairn/nats
USER 10002:10002
EXPOSE 4222 6222
ENTRYPOINT ["/usr/local/bin/nats-server"]
CMD ["-c", "/etc/cairn/nats/container.conf"]
