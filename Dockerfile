# predictgate image: the `predictgate` command (controller, gateway, local mode and the bundled
# example models) on a current Node LTS, production dependencies only, running as a non-root user.
# Build: docker build -t predictgate:0.1.0 .   (what it runs is the same `npm run build` output the tests use)

FROM node:24-bookworm-slim AS build
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json ./
COPY src ./src
COPY test ./test
RUN npm run build && npm prune --omit=dev --no-audit --no-fund

FROM node:24-bookworm-slim
ENV NODE_ENV=production
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
