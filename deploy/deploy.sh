#!/usr/bin/env bash
# Deploys the Sentinel assistant for Microsoft Teams into an existing resource group (see deploy/README.md):
#
#   deploy/deploy.sh -g RESOURCE_GROUP -p PARAMETERS_FILE [--acr REGISTRY_NAME [--tag TAG]] [--name DEPLOYMENT]
#
#   -g, --resource-group  the resource group for the bot's resources (create it first: az group create)
#   -p, --parameters      a parameters file, e.g. a copy of deploy/azuredeploy.parameters.example.json
#   --acr                 first build the image from this repository in that Azure Container Registry
#                         (az acr build: no local Docker needed) and deploy that image, pulled with the
#                         bot's managed identity
#   --tag                 the image tag for --acr (default: the git commit, else the time)
#   --name                the deployment name (default: sentinel-bot-<time>)
#
# Needs the Azure CLI, signed in (az login) as someone who may create the resources and assign roles on the
# Sentinel workspace, the Azure OpenAI account and the registry (Owner or User Access Administrator there).
# Nothing secret is read, written or printed.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(dirname "$here")"
template="$here/azuredeploy.json"
image_repository="sentinel-teams-bot"

usage() {
  { echo "usage:"; sed -n '4,12p' "${BASH_SOURCE[0]}" | sed 's/^#//'; } >&2
  exit 2
}

fail() {
  echo "error: $*" >&2
  exit 1
}

resource_group=""
parameters=""
registry=""
tag=""
deployment="sentinel-bot-$(date -u +%Y%m%d%H%M%S)"
while [ $# -gt 0 ]; do
  case "$1" in
    -g|--resource-group) [ $# -ge 2 ] || usage; resource_group="$2"; shift 2 ;;
    -p|--parameters) [ $# -ge 2 ] || usage; parameters="$2"; shift 2 ;;
    --acr) [ $# -ge 2 ] || usage; registry="$2"; shift 2 ;;
    --tag) [ $# -ge 2 ] || usage; tag="$2"; shift 2 ;;
    --name) [ $# -ge 2 ] || usage; deployment="$2"; shift 2 ;;
    -h|--help) usage ;;
    *) echo "unknown argument: $1" >&2; usage ;;
  esac
done
[ -n "$resource_group" ] && [ -n "$parameters" ] || usage
[ -f "$parameters" ] \
  || fail "parameters file not found: $parameters (start from deploy/azuredeploy.parameters.example.json)"
if grep -q '00000000-0000-0000-0000-000000000000' "$parameters"; then
  fail "$parameters still holds the example's placeholder ids:" \
    "put in your workspace's and Azure OpenAI account's resource ids"
fi

command -v az >/dev/null 2>&1 \
  || fail "the Azure CLI (az) is not installed: https://learn.microsoft.com/cli/azure/install-azure-cli"
account="$(az account show --query '[name, id]' -o tsv 2>/dev/null)" \
  || fail "the Azure CLI is not signed in: run az login (and az account set --subscription <id>)"
echo "Subscription: $(echo "$account" | tr '\t' ' ')"
az group show --name "$resource_group" --output none 2>/dev/null \
  || fail "resource group $resource_group not found in this subscription:" \
    "az group create --name $resource_group --location <region>"

overrides=()
if [ -n "$registry" ]; then
  if [ -z "$tag" ]; then
    tag="$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || date -u +%Y%m%d%H%M%S)"
  fi
  login_server="$(az acr show --name "$registry" --query loginServer -o tsv)"
  registry_id="$(az acr show --name "$registry" --query id -o tsv)"
  echo "Building $login_server/$image_repository:$tag in $registry (az acr build) ..."
  az acr build --registry "$registry" --image "$image_repository:$tag" --file "$repo/Dockerfile" "$repo"
  overrides=(containerImage="$login_server/$image_repository:$tag" containerRegistryResourceId="$registry_id")
fi

echo "Deploying $template to $resource_group as deployment $deployment ..."
az deployment group create \
  --resource-group "$resource_group" \
  --name "$deployment" \
  --template-file "$template" \
  --parameters "@$parameters" ${overrides[@]+"${overrides[@]}"} \
  --output none

output() {
  az deployment group show --resource-group "$resource_group" --name "$deployment" \
    --query "properties.outputs.$1.value" -o tsv
}
app_id="$(output botAppId)"
host_name="$(output webAppHostName)"
endpoint="$(output messagingEndpoint)"
web_app="$(output webAppName)"
sso_app_id="$(output ssoAppId)"  # empty unless on-behalf-of mode (ssoAppId) was deployed

cat <<EOF

Deployed.
  Bot app id (the managed identity's client id): $app_id
  Web app:                                       https://$host_name  ($web_app)
  Messaging endpoint:                            $endpoint

Next:
  1. Check the bot is up (role assignments can take a few minutes to apply):
       curl https://$host_name/healthz
  2. Build the Teams app package with this app id and domain:
       python -m bot package --app-id $app_id --domain $host_name${sso_app_id:+ --sso-app-id $sso_app_id}
  3. Upload the zip to Teams: Apps > Manage your apps > Upload an app (or ask your Teams admin to
     publish it to the organisation), then say "help" to the bot.
EOF
if [[ -n "$sso_app_id" ]]; then
  unique_id="$(output ssoUniqueIdentifier)"
  cat <<EOF
  4. On-behalf-of mode: the app registration $sso_app_id must expose api://botid-$app_id, trust two
     federated credentials (the bot's identity, and the Bot Framework token service for the OAuth
     connection: subject ending in /$unique_id) and have admin consent for Log Analytics Data.Read and
     Azure Resource Manager user_impersonation (deploy/README.md, "Reading with each analyst's permissions").
EOF
fi
