#include "onednn.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "interpose/dnnl/dnnl.hpp"
#include "ir/node.hpp"

namespace sol::test {

dnnl_engine_t engine() {
  static dnnl_engine_t e = [] {
    dnnl_engine_t x = nullptr;
    dnnl_engine_create(&x, dnnl_cpu, 0);
    return x;
  }();
  return e;
}

dnnl_stream_t stream() {
  static dnnl_stream_t s = [] {
    dnnl_stream_t x = nullptr;
    dnnl_stream_create(&x, engine(), dnnl_stream_default_flags);
    return x;
  }();
  return s;
}

dnnl_memory_desc_t md(const Dims& dims, dnnl_format_tag_t tag, dnnl_data_type_t dt) {
  dnnl_memory_desc_t m{};
  EXPECT_EQ(dnnl_memory_desc_init_by_tag(&m, static_cast<int>(dims.size()), dims.data(), dt, tag),
            dnnl_success);
  return m;
}

dnnl_format_tag_t plain_tag(int ndims) {
  static const dnnl_format_tag_t tags[] = {
      dnnl_format_tag_undef, dnnl_a, dnnl_ab, dnnl_abc, dnnl_abcd, dnnl_abcde, dnnl_abcdef};
  return tags[ndims];
}

dnnl_primitive_desc_t pd_of(const void* op_desc, const_dnnl_primitive_desc_t hint,
                            const_dnnl_primitive_attr_t attr) {
  dnnl_primitive_desc_t pd = nullptr;
  EXPECT_EQ(dnnl_primitive_desc_create(&pd, op_desc, attr, engine(), hint), dnnl_success);
  return pd;
}

dnnl_primitive_desc_t bwd_pd(const void* fwd_desc, const void* bwd_desc) {
  dnnl_primitive_desc_t hint = pd_of(fwd_desc);
  dnnl_primitive_desc_t pd = pd_of(bwd_desc, hint);
  dnnl_primitive_desc_destroy(hint);
  return pd;
}

void bind_frontend() {
  static const bool bound = interpose::dnnl::bind(reinterpret_cast<const void*>(&dnnl_primitive_desc_query));
  ASSERT_TRUE(bound);
}

void fill_nan(unsigned char* p, size_t n) {
  const uint32_t nan = 0x7fc00bad;
  for (size_t i = 0; i + 4 <= n; i += 4) std::memcpy(p + i, &nan, 4);
  for (size_t i = n / 4 * 4; i < n; ++i) p[i] = 0xff;
}

Buffer::Buffer(const dnnl_memory_desc_t& m, size_t at_least)
    : md(m), bytes(std::max(dnnl_memory_desc_get_size(&m), at_least) + 2 * kGuard) {
  // Each zone filled from its own start: the trailing guard's pattern must not depend on the
  // tensor's size (a u8 workspace of 90 bytes would shift it by two).
  fill_nan(bytes.data(), kGuard);
  fill_nan(data(), size());
  fill_nan(data() + size(), kGuard);
  dnnl_memory_create(&memory, &md, engine(), data());
}

Buffer::Buffer(const Buffer& o) : Buffer(o.md, o.size()) {
  take_bytes(o);
}

Buffer::~Buffer() {
  dnnl_memory_destroy(memory);
}

void Buffer::take_bytes(const Buffer& o) {
  std::memcpy(bytes.data(), o.bytes.data(), bytes.size());
}

bool Buffer::guards_intact() const {
  std::vector<unsigned char> guard(kGuard);
  fill_nan(guard.data(), kGuard);
  return !std::memcmp(bytes.data(), guard.data(), kGuard) &&
         !std::memcmp(bytes.data() + bytes.size() - kGuard, guard.data(), kGuard);
}

void fill_random(Buffer& b, unsigned seed, bool positive) {
  const dnnl_memory_desc_t& m = b.md;
  const dnnl_memory_desc_t plain = md(Dims(m.dims, m.dims + m.ndims), plain_tag(m.ndims));
  std::vector<float> values(dnnl_memory_desc_get_size(&plain) / sizeof(float));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(positive ? 0.1f : -1.f, positive ? 2.f : 1.f);
  for (float& v : values) v = dist(rng);
  dnnl_memory_t from = nullptr;
  dnnl_memory_create(&from, &plain, engine(), values.data());
  dnnl_primitive_desc_t rpd = nullptr;
  ASSERT_EQ(dnnl_reorder_primitive_desc_create(&rpd, &plain, engine(), &m, engine(), nullptr), dnnl_success);
  dnnl_primitive_t r = nullptr;
  dnnl_primitive_create(&r, rpd);
  dnnl_exec_arg_t args[] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, b.memory}};
  dnnl_primitive_execute(r, stream(), 2, args);
  dnnl_stream_wait(stream());
  dnnl_primitive_destroy(r);
  dnnl_primitive_desc_destroy(rpd);
  dnnl_memory_destroy(from);
}

std::vector<int> exec_arg_kinds(const_dnnl_primitive_desc_t pd) {
  int n_multi = 0;
  while (dnnl_primitive_desc_query_md(pd, dnnl_query_exec_arg_md, DNNL_ARG_MULTIPLE_SRC + n_multi)->ndims)
    ++n_multi;
  std::vector<int> args = {DNNL_ARG_SRC,      DNNL_ARG_SRC_1,      DNNL_ARG_WEIGHTS,      DNNL_ARG_BIAS,
                           DNNL_ARG_DST,      DNNL_ARG_DIFF_SRC,   DNNL_ARG_DIFF_WEIGHTS, DNNL_ARG_DIFF_BIAS,
                           DNNL_ARG_DIFF_DST, DNNL_ARG_MEAN,       DNNL_ARG_VARIANCE,     DNNL_ARG_SCALE,
                           DNNL_ARG_SHIFT,    DNNL_ARG_DIFF_SCALE, DNNL_ARG_DIFF_SHIFT,   DNNL_ARG_WORKSPACE};
  for (int i = 0; i < n_multi; ++i) args.push_back(DNNL_ARG_MULTIPLE_SRC + i);
  // Binary post-ops only: oneDNN answers the query for other positions with whatever they hold.
  const_dnnl_primitive_attr_t attr = nullptr;
  const_dnnl_post_ops_t po = nullptr;
  if (dnnl_primitive_desc_get_attr(pd, &attr) == dnnl_success && attr &&
      dnnl_primitive_attr_get_post_ops(attr, &po) == dnnl_success && po)
    for (int i = 0; i < dnnl_post_ops_len(po); ++i)
      if (dnnl_post_ops_get_kind(po, i) == dnnl_binary)
        args.push_back(DNNL_ARG_ATTR_MULTIPLE_POST_OP(i) | DNNL_ARG_SRC_1);
  return args;
}

std::vector<dnnl_exec_arg_t> exec_args(Args& args) {
  std::vector<dnnl_exec_arg_t> out;
  for (auto& [arg, b] : args) out.push_back({arg, b->memory});
  return out;
}

std::string run_native(dnnl_primitive_desc_t pd, Args& args) {
  dnnl_primitive_t p = nullptr;
  if (dnnl_primitive_create(&p, pd) != dnnl_success) return "dnnl_primitive_create failed";
  std::vector<dnnl_exec_arg_t> a = exec_args(args);
  const dnnl_status_t st = dnnl_primitive_execute(p, stream(), static_cast<int>(a.size()), a.data());
  dnnl_stream_wait(stream());
  dnnl_primitive_destroy(p);
  return st == dnnl_success ? "" : "native execution failed";
}

namespace {

hal::Reason frontend_failed(const std::string& what, std::string* why) {
  if (!why) ADD_FAILURE() << what;
  if (why) *why = what;
  return hal::Reason::internal_error;
}

}  // namespace

hal::Reason run_on(hal::Backend& backend, dnnl_primitive_desc_t pd, Args& args,
                   const std::function<void(capture::dnn::Desc&)>& edit, std::string* why) {
  const auto info = interpose::dnnl::describe(pd);
  if (!info || !info->node)
    return frontend_failed(
        "the frontend did not describe it: " + (info ? info->why_not : "describe() failed"), why);
  capture::dnn::Desc desc = *info->node;
  if (edit) edit(desc);
  std::vector<dnnl_exec_arg_t> a = exec_args(args);
  capture::dnn::Call call;
  const char* bind_why = nullptr;
  if (!interpose::dnnl::bind_call(*info, static_cast<int>(a.size()), a.data(), call, &bind_why))
    return frontend_failed(std::string("bind_call failed: ") + (bind_why ? bind_why : "?"), why);
  call.desc = &desc;
  capture::Node node(capture::Sym::dnnl_primitive_execute, desc.kind, desc.dtype);
  node.dnn = &call;
  if (hal::Reason r = backend.supports(node); r != hal::Reason::ok) return r;
  return backend.run(node);
}

}  // namespace sol::test
