# The controller image; it also carries the transfer command that the
# transfer Jobs run. Tests never need it.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /out/ ./cmd/migration-controller ./cmd/vm-transfer

FROM gcr.io/distroless/static:nonroot
COPY --from=build /out/ /usr/local/bin/
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/migration-controller"]
