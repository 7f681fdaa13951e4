# predictgate image: the `predictgate` command (controller, gateway, local mode and the bundled
# example models) on a current Node LTS, production dependencies only, running as a non-root user.
# Build: docker build -t predictgate:0.1.0 .   (what it runs is the same `npm run build` output the tests use)
# BASE is the Node image both stages start from. The test node's build runs offline on a base of its
# own (test/cluster/images.ts: Debian bookworm minbase with the Node 24 release CI runs, passed as
# buildah bud --build-arg BASE=...).
ARG BASE=node:24-bookworm-slim

FROM ${BASE} AS build
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json ./
COPY src ./src
COPY test ./test
RUN npm run build && npm prune --omit=dev --no-audit --no-fund

FROM ${BASE}
ENV NODE_ENV=production
# Runtime settings of every command in the image; the chart sets the same ones (values.yaml:
# nodeOptions and glibcTunables of the gateway and the controller, with the old generation sized from
# the container's memory limit: heapPercent), and either place overrides them (docker run -e). The
# bench runs the gateway with these; docs/performance.md gives each one's figures.
# --max-semi-space-size=4: a 4 MB young generation semi-space (V8 picks 16 MB or more) keeps RSS down.
ENV NODE_OPTIONS="--max-semi-space-size=4"
# mmap_threshold: blocks of 128 KiB or more (whole bodies) get their own mapping, returned when freed,
# instead of glibc's threshold rising to the largest block freed and keeping them in its heap.
ENV GLIBC_TUNABLES="glibc.malloc.mmap_threshold=131072"
WORKDIR /app
COPY --from=build /src/package.json ./
COPY --from=build /src/node_modules ./node_modules
COPY --from=build /src/dist/src ./dist/src
COPY bin ./bin
COPY crds ./crds
RUN ln -s /app/bin/predictgate.js /usr/local/bin/predictgate \
 && groupadd --gid 10001 predictgate \
 && useradd --uid 10001 --gid 10001 --no-create-home --shell /usr/sbin/nologin predictgate
USER 10001:10001
EXPOSE 8080
ENTRYPOINT ["predictgate"]
CMD ["--help"]
