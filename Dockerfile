# syntax=docker/dockerfile:1.7
# One image for `oneshot dispatcher` and `oneshot provisionerd` (with terraform).
#
#   docker build -t ghcr.io/oneshot-dev/oneshot:0.1.0 .
#   docker buildx build --platform linux/amd64,linux/arm64 --build-arg VERSION=0.1.0 \
#     --build-arg REVISION=$(git rev-parse HEAD) --build-arg CREATED=$(date -u +%FT%TZ) .
#
# The jar in the image is built with -Pslim: without the embedded PostgreSQL binaries, which only
# `oneshot dev` uses.
#   docker build --build-arg TERRAFORM_VERSION=1.11.4 --build-arg TERRAFORM_SHA256_AMD64=... .
#
# For a reproducible build pin the base images by digest (--build-arg JDK_IMAGE=...@sha256:...,
# JRE_IMAGE=...@sha256:...); the Maven build itself is pinned by pom.xml and the wrapper.

ARG JDK_IMAGE=eclipse-temurin:25-jdk-noble
ARG JRE_IMAGE=eclipse-temurin:25-jre-noble

# --- build: the slim jar (no embedded PostgreSQL), on the builder's own platform (it runs on any)
FROM --platform=$BUILDPLATFORM ${JDK_IMAGE} AS build
WORKDIR /src
COPY .mvn/ .mvn/
COPY mvnw pom.xml ./
RUN --mount=type=cache,target=/root/.m2 ./mvnw -B -q --no-transfer-progress dependency:go-offline
COPY src/ src/
RUN --mount=type=cache,target=/root/.m2 \
    ./mvnw -B -q --no-transfer-progress -Pslim -Dmaven.test.skip=true -Dspotless.check.skip=true package \
 && cp target/oneshot-slim.jar /oneshot.jar

# --- terraform, its checksum verified ------------------------------------------------------
FROM --platform=$BUILDPLATFORM ${JRE_IMAGE} AS terraform
ARG TARGETARCH=amd64
ARG TERRAFORM_VERSION=1.11.4
# SHA-256 of terraform_<version>_linux_<arch>.zip, as in HashiCorp's SHA256SUMS for the version.
ARG TERRAFORM_SHA256_AMD64=1ce994251c00281d6845f0f268637ba50c0005657eb3cf096b92f753b42ef4dc
ARG TERRAFORM_SHA256_ARM64=a43d1d0da9b9bab214a8305a39db0e40869572594ccf50c416a7756499143633
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates curl unzip \
 && rm -rf /var/lib/apt/lists/*
RUN set -eu; \
    case "$TARGETARCH" in \
      amd64) sum="$TERRAFORM_SHA256_AMD64" ;; \
      arm64) sum="$TERRAFORM_SHA256_ARM64" ;; \
      *) echo "no terraform checksum for $TARGETARCH" >&2; exit 1 ;; \
    esac; \
    zip="terraform_${TERRAFORM_VERSION}_linux_${TARGETARCH}.zip"; \
    curl -fsSLo "/tmp/$zip" "https://releases.hashicorp.com/terraform/${TERRAFORM_VERSION}/$zip"; \
    echo "$sum  /tmp/$zip" | sha256sum -c -; \
    unzip -q "/tmp/$zip" terraform -d /usr/local/bin; \
    /usr/local/bin/terraform version

# --- runtime --------------------------------------------------------------------------------
FROM ${JRE_IMAGE}
ARG UID=10001
ARG VERSION=0.1.0
ARG REVISION=unknown
ARG CREATED=unknown
LABEL org.opencontainers.image.title="oneshot" \
      org.opencontainers.image.description="Runs every infrastructure build in its own short-lived Kubernetes Job: the dispatcher and provisionerd, with terraform" \
      org.opencontainers.image.source="https://github.com/oneshot-dev/oneshot" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}"
# git and ssh: terraform fetches modules from git sources (git::https://..., git@...).
RUN apt-get update \
 && apt-get install -y --no-install-recommends git openssh-client \
 && rm -rf /var/lib/apt/lists/*
RUN groupadd --system --gid "$UID" oneshot \
 && useradd --system --uid "$UID" --gid oneshot --home-dir /work --shell /usr/sbin/nologin oneshot \
 && mkdir -p /opt/oneshot /work /plugin-cache \
 && chown oneshot:oneshot /work /plugin-cache
COPY --from=terraform /usr/local/bin/terraform /usr/local/bin/terraform
COPY --from=build /oneshot.jar /opt/oneshot/oneshot.jar

# JVM flags per command: provisionerd is a one-shot process (fast start: class data sharing,
# the C1 compiler only, a small serial heap); the dispatcher is long-lived (heap from the
# container's memory limit). JAVA_TOOL_OPTIONS adds to either.
COPY --chmod=0755 <<'SH' /usr/local/bin/oneshot
#!/bin/sh
set -e
case "${1:-}" in
  provisionerd)
    exec java -XX:SharedArchiveFile=/opt/oneshot/oneshot.jsa -Xshare:auto -XX:+UseSerialGC \
      -XX:TieredStopAtLevel=1 -XX:-UsePerfData -Xss512k -XX:MaxRAMPercentage=50 \
      -jar /opt/oneshot/oneshot.jar "$@" ;;
  *)
    exec java -XX:SharedArchiveFile=/opt/oneshot/oneshot.jsa -Xshare:auto -XX:+UseSerialGC \
      -XX:MaxRAMPercentage=70 -XX:+ExitOnOutOfMemoryError -jar /opt/oneshot/oneshot.jar "$@" ;;
esac
SH
# The class data sharing archive, written once at build time from a whole script build that
# provisionerd runs against an API of its own (--warm-up): it holds what a build loads.
RUN java -XX:ArchiveClassesAtExit=/opt/oneshot/oneshot.jsa -jar /opt/oneshot/oneshot.jar provisionerd --warm-up

ENV TF_IN_AUTOMATION=1 CHECKPOINT_DISABLE=1 ONESHOT_WORK_DIR=/work HOME=/work
USER 10001:10001
WORKDIR /work
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/oneshot"]
CMD ["dispatcher", "--config", "/etc/oneshot/config/oneshot.yaml"]
