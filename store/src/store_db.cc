#include "kiln/store/store_db.h"

namespace kiln::store {

namespace {

// Nix 2.8's schema 10 (spec §8), so tools and people who know Nix's
// database find the same tables and meanings.
constexpr const char* kMigration1 = R"sql(
CREATE TABLE ValidPaths (
    id               integer primary key autoincrement not null,
    path             text unique not null,
    hash             text not null,
    registrationTime integer not null,
    deriver          text,
    narSize          integer,
    ultimate         integer,
    sigs             text,
    ca               text
);
CREATE TABLE Refs (
    referrer  integer not null,
    reference integer not null,
    primary key (referrer, reference),
    foreign key (referrer) references ValidPaths(id) on delete cascade,
    foreign key (reference) references ValidPaths(id) on delete restrict
);
CREATE INDEX IndexReferrer on Refs(referrer);
CREATE INDEX IndexReference on Refs(reference);
CREATE TRIGGER DeleteSelfRefs before delete on ValidPaths
  begin
    delete from Refs where referrer = old.id and reference = old.id;
  end;
CREATE TABLE DerivationOutputs (
    drv  integer not null,
    id   text not null,
    path text not null,
    primary key (drv, id),
    foreign key (drv) references ValidPaths(id) on delete cascade
);
CREATE INDEX IndexDerivationOutputs on DerivationOutputs(path);
)sql";

// kiln's own facts about the store, e.g. which logical store directory the
// hashes in ValidPaths were computed for.
constexpr const char* kMigration2 = R"sql(
CREATE TABLE StoreMeta (
    key   text primary key not null,
    value text not null
);
)sql";

}  // namespace

const std::vector<SqliteMigration>& storeSchemaMigrations() {
  static const std::vector<SqliteMigration> all = {
      {1, kMigration1},
      {2, kMigration2},
  };
  return all;
}

std::unique_ptr<SqliteDb> openStoreDb(const std::string& dbPath,
                                      const std::string& storeDir) {
  auto db = std::make_unique<SqliteDb>(dbPath);
  migrateSchema(*db, storeSchemaMigrations());
  retrySqlite([&] {
    SqliteTxn txn(*db);
    auto get = db->prepare("select value from StoreMeta where key = 'storeDir'");
    if (get.step()) {
      auto recorded = get.getStr(0);
      if (recorded != storeDir)
        throw Error("store database '" + dbPath + "' belongs to store directory '" +
                    recorded + "', not '" + storeDir + "'");
      return;
    }
    db->prepare("insert into StoreMeta (key, value) values ('storeDir', ?)")
        .bind(storeDir)
        .exec();
    txn.commit();
  });
  return db;
}

}  // namespace kiln::store
