#include "server/daemon/reflection_v1.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/descriptor.pb.h>

#include <set>
#include <utility>

namespace transposed {
namespace {

namespace rv1 = grpc::reflection::v1;
using google::protobuf::Descriptor;
using google::protobuf::DescriptorPool;
using google::protobuf::FieldDescriptor;
using google::protobuf::FileDescriptor;

// `file` (always), then the files it imports (transitively) that `sent` does not hold yet.
void AddFile(const FileDescriptor* file, std::set<std::string>* sent,
             rv1::FileDescriptorResponse* out) {
  std::vector<const FileDescriptor*> todo = {file};
  sent->erase(file->name());
  while (!todo.empty()) {
    const FileDescriptor* f = todo.back();
    todo.pop_back();
    if (!sent->insert(f->name()).second) continue;
    google::protobuf::FileDescriptorProto proto;
    f->CopyTo(&proto);
    proto.SerializeToString(out->add_file_descriptor_proto());
    for (int i = f->dependency_count() - 1; i >= 0; --i) todo.push_back(f->dependency(i));
  }
}

void Error(rv1::ServerReflectionResponse* r, grpc::StatusCode code, const std::string& message) {
  r->mutable_error_response()->set_error_code(static_cast<int>(code));
  r->mutable_error_response()->set_error_message(message);
}

}  // namespace

ReflectionV1::ReflectionV1(std::vector<std::string> services) : services_(std::move(services)) {}

grpc::Status ReflectionV1::ServerReflectionInfo(
    grpc::ServerContext* /*context*/,
    grpc::ServerReaderWriter<rv1::ServerReflectionResponse, rv1::ServerReflectionRequest>* stream) {
  const DescriptorPool* pool = DescriptorPool::generated_pool();
  std::set<std::string> sent;  // files this stream has sent
  rv1::ServerReflectionRequest request;
  while (stream->Read(&request)) {
    rv1::ServerReflectionResponse r;
    r.set_valid_host(request.host());
    *r.mutable_original_request() = request;
    const FileDescriptor* file = nullptr;
    std::string asked;
    switch (request.message_request_case()) {
      case rv1::ServerReflectionRequest::kFileByFilename:
        asked = "file " + request.file_by_filename();
        file = pool->FindFileByName(request.file_by_filename());
        break;
      case rv1::ServerReflectionRequest::kFileContainingSymbol:
        asked = "symbol " + request.file_containing_symbol();
        file = pool->FindFileContainingSymbol(request.file_containing_symbol());
        break;
      case rv1::ServerReflectionRequest::kFileContainingExtension: {
        const auto& e = request.file_containing_extension();
        asked = "extension " + std::to_string(e.extension_number()) + " of " + e.containing_type();
        const Descriptor* type = pool->FindMessageTypeByName(e.containing_type());
        const FieldDescriptor* ext =
            type != nullptr ? pool->FindExtensionByNumber(type, e.extension_number()) : nullptr;
        if (ext != nullptr) file = ext->file();
        break;
      }
      case rv1::ServerReflectionRequest::kAllExtensionNumbersOfType: {
        const Descriptor* type =
            pool->FindMessageTypeByName(request.all_extension_numbers_of_type());
        if (type == nullptr) {
          Error(&r, grpc::StatusCode::NOT_FOUND,
                "type not found: " + request.all_extension_numbers_of_type());
          break;
        }
        std::vector<const FieldDescriptor*> extensions;
        pool->FindAllExtensions(type, &extensions);
        auto* out = r.mutable_all_extension_numbers_response();
        out->set_base_type_name(type->full_name());
        for (const FieldDescriptor* f : extensions) out->add_extension_number(f->number());
        break;
      }
      case rv1::ServerReflectionRequest::kListServices:
        for (const std::string& name : services_)
          r.mutable_list_services_response()->add_service()->set_name(name);
        break;
      default:
        Error(&r, grpc::StatusCode::INVALID_ARGUMENT, "no message_request");
    }
    if (file != nullptr) {
      AddFile(file, &sent, r.mutable_file_descriptor_response());
    } else if (!asked.empty()) {
      Error(&r, grpc::StatusCode::NOT_FOUND, asked + " not found");
    }
    if (!stream->Write(r)) break;
  }
  return grpc::Status::OK;
}

}  // namespace transposed
