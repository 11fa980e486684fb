#pragma once
/// The local store's SQLite database: its numbered schema migrations and
/// how it is opened. Tables follow Nix's (spec §8, vectors/db/schema.sql):
/// ValidPaths, Refs, DerivationOutputs; kiln adds StoreMeta.

#include <memory>
#include <string>
#include <vector>

#include "kiln/common/sqlite.h"

namespace kiln::store {

/// The schema version this kiln writes (`PRAGMA user_version`).
inline constexpr int64_t kStoreSchemaVersion = 2;

/// Migrations 1..kStoreSchemaVersion: 1 creates Nix's tables, 2 adds
/// StoreMeta (key/value: the logical store directory).
const std::vector<SqliteMigration>& storeSchemaMigrations();

/// Opens (creating) the database at `dbPath` in WAL mode, migrates it and
/// checks that it belongs to logical store directory `storeDir` (recording
/// it on first use). Throws SchemaError for a newer schema and Error for a
/// store directory mismatch, both naming the file.
std::unique_ptr<SqliteDb> openStoreDb(const std::string& dbPath,
                                      const std::string& storeDir);

}  // namespace kiln::store
