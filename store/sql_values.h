// SQL values of the store's fields: one ToSql/FromSql overload pair per C++ type a column holds.
// Enums are stored as their names, maps and a MeasureMethod as one JSON object (a method of an
// older version, with its fields nested under "round" or "measurement", is read too), a missing
// optional and a non-finite real as NULL. The column tables (store/rows.cc) bind and read every
// field through these.
//
// Thread-safety: the functions keep no state; a statement is used by one thread at a time.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "core/measurement.h"
#include "core/problem.h"
#include "core/status.h"
#include "core/tune_result.h"
#include "store/sqlite.h"

namespace transposed {
namespace store_internal {

Status ToSql(Stmt& st, int i, const std::string& v);
Status ToSql(Stmt& st, int i, int64_t v);
Status ToSql(Stmt& st, int i, int v);
Status ToSql(Stmt& st, int i, uint64_t v);
Status ToSql(Stmt& st, int i, double v);
Status ToSql(Stmt& st, int i, bool v);
Status ToSql(Stmt& st, int i, DType v);
Status ToSql(Stmt& st, int i, Phase v);
Status ToSql(Stmt& st, int i, Origin v);
Status ToSql(Stmt& st, int i, Exactness v);
Status ToSql(Stmt& st, int i, const std::optional<double>& v);
Status ToSql(Stmt& st, int i, const std::map<std::string, int64_t>& params);
Status ToSql(Stmt& st, int i, const std::map<std::string, std::string>& attrs);
Status ToSql(Stmt& st, int i, const MeasureMethod& m);
Status FromSql(const Stmt& st, int i, MeasureMethod* out);
Status FromSql(const Stmt& st, int i, std::string* v);
Status FromSql(const Stmt& st, int i, int64_t* v);
Status FromSql(const Stmt& st, int i, int* v);
Status FromSql(const Stmt& st, int i, uint64_t* v);
Status FromSql(const Stmt& st, int i, double* v);
Status FromSql(const Stmt& st, int i, bool* v);
Status FromSql(const Stmt& st, int i, DType* v);
Status FromSql(const Stmt& st, int i, Phase* v);
Status FromSql(const Stmt& st, int i, Origin* v);
Status FromSql(const Stmt& st, int i, Exactness* v);
Status FromSql(const Stmt& st, int i, std::map<std::string, int64_t>* out);
Status FromSql(const Stmt& st, int i, std::map<std::string, std::string>* out);

}  // namespace store_internal
}  // namespace transposed
