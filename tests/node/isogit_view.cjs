// What isomorphic-git reads of a repository, as JSON on stdout:
// node isogit_view.cjs DIR GITDIR (the worktree, and the git dir it uses).
const fs = require("fs");
const git = require("isomorphic-git");

async function view(dir, gitdir) {
  const head = await git.resolveRef({ fs, dir, gitdir, ref: "HEAD" });
  const branches = await git.listBranches({ fs, dir, gitdir });
  const log = (await git.log({ fs, dir, gitdir })).map((entry) => entry.oid);
  const config = {};
  for (const key of ["core.bare", "core.repositoryformatversion", "user.name", "include.path"]) {
    config[key] = await git.getConfigAll({ fs, dir, gitdir, path: key });
  }
  const status = await git.statusMatrix({ fs, dir, gitdir });
  return { head, branches, log, config, status };
}

view(process.argv[2], process.argv[3]).then(
  (found) => process.stdout.write(JSON.stringify(found)),
  (error) => {
    process.stdout.write(JSON.stringify({ error: String(error) }));
  },
);
