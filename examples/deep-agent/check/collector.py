"""A fake OTLP/HTTP collector: every span it receives, one JSON line in a file.

    python collector.py <port file> <spans file>
"""

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

port_file, spans_file = sys.argv[1], sys.argv[2]


class Collector(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        request = ExportTraceServiceRequest()
        request.ParseFromString(self.rfile.read(int(self.headers["Content-Length"])))
        with open(spans_file, "a") as out:
            for resource in request.resource_spans:
                service = next((a.value.string_value for a in resource.resource.attributes if a.key == "service.name"), "")
                for scope in resource.scope_spans:
                    for span in scope.spans:
                        attributes = {a.key: a.value.string_value or a.value.int_value for a in span.attributes}
                        out.write(json.dumps({
                            "service": service,
                            "name": span.name,
                            "trace_id": span.trace_id.hex(),
                            "span_id": span.span_id.hex(),
                            "parent": span.parent_span_id.hex(),
                            "attributes": attributes,
                            "start": span.start_time_unix_nano,
                            "end": span.end_time_unix_nano,
                        }) + "\n")
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


server = ThreadingHTTPServer(("127.0.0.1", 0), Collector)
with open(port_file, "w") as out:
    out.write(str(server.server_address[1]))
server.serve_forever()
