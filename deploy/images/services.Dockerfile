# Every Cairn process: the pinned Node.js (the npm `node` package's binary), the production
# node_modules and the built dist/ of the apps and libraries, on the stack's Debian base.
# Built by `cairn images build --stack` (docs/adr/0023-stack-images.md), which lays out the context
# and fills in the base's tag; `docker build` of this file alone does not work.
FROM {{base}}
COPY node /usr/local/bin/node
# The dependencies first: they change less often than dist/, so the engine keeps their layer.
COPY node_modules /app/node_modules
COPY package.json package-lock.json /app/
COPY libs /app/libs
COPY apps /app/apps
COPY runtime-entry.sh /usr/local/bin/cairn-runtime-entry
# The state a container keeps, owned by the user every service runs as (named volumes copy it).
RUN install -d -o 10001 -g 10001 -m 0700 /var/lib/cairn /var/lib/cairn/worker
ENV NODE_ENV=production
WORKDIR /app
USER 10001:10001
CMD ["node", "apps/cli/dist/main.js", "--help"]
